; tecomp golden, made with llvmlite 0.50.0 (LLVM 22.1.0)
; ModuleID = "tecomp_49953ee3b155"

define void @"tecomp_49953ee3b155"(ptr noalias %"p0_x", ptr noalias %"p1_softmax") nounwind
{
entry:
  %"softmax_max" = alloca [16 x float], align 64
  %"softmax_exp" = alloca [592 x float], align 64
  %"softmax_sum" = alloca [16 x float], align 64
  br label %"start"
start:
  %".4" = add i64 0, 16
  br label %"i0.head"
i0.head:
  %"i0" = phi  i64 [0, %"start"], [%".73", %"i0.body"]
  %".6" = icmp slt i64 %"i0", %".4"
  br i1 %".6", label %"i0.body", label %"i0.exit"
i0.body:
  %".8" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  store float 0xfff0000000000000, ptr %".8", align 4
  %".10" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".11" = mul nsw i64 %"i0", 37
  %".12" = add nsw i64 %".11", 0
  %".13" = getelementptr inbounds float, ptr %"p0_x", i64 %".12"
  %".14" = load <8 x float>, ptr %".13", align 4
  %".15" = add nsw i64 0, 8
  %".16" = insertelement <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".15", i32 0
  %".17" = shufflevector <8 x i64> %".16", <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".18" = add <8 x i64> %".17", <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".19" = mul nsw i64 %"i0", 37
  %".20" = add nsw i64 %".19", %".15"
  %".21" = getelementptr inbounds float, ptr %"p0_x", i64 %".20"
  %".22" = load <8 x float>, ptr %".21", align 4
  %".23" = add nsw i64 0, 16
  %".24" = insertelement <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".23", i32 0
  %".25" = shufflevector <8 x i64> %".24", <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".26" = add <8 x i64> %".25", <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".27" = mul nsw i64 %"i0", 37
  %".28" = add nsw i64 %".27", %".23"
  %".29" = getelementptr inbounds float, ptr %"p0_x", i64 %".28"
  %".30" = load <8 x float>, ptr %".29", align 4
  %".31" = add nsw i64 0, 24
  %".32" = insertelement <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".31", i32 0
  %".33" = shufflevector <8 x i64> %".32", <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".34" = add <8 x i64> %".33", <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".35" = mul nsw i64 %"i0", 37
  %".36" = add nsw i64 %".35", %".31"
  %".37" = getelementptr inbounds float, ptr %"p0_x", i64 %".36"
  %".38" = load <8 x float>, ptr %".37", align 4
  %".39" = call <8 x float> @"llvm.maximum.v8f32"(<8 x float> %".14", <8 x float> %".22")
  %".40" = call <8 x float> @"llvm.maximum.v8f32"(<8 x float> %".30", <8 x float> %".38")
  %".41" = call <8 x float> @"llvm.maximum.v8f32"(<8 x float> %".39", <8 x float> %".40")
  %".42" = shufflevector <8 x float> %".41", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <4 x i32> <i32 0, i32 1, i32 2, i32 3>
  %".43" = shufflevector <8 x float> %".41", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <4 x i32> <i32 4, i32 5, i32 6, i32 7>
  %".44" = call <4 x float> @"llvm.maximum.v4f32"(<4 x float> %".42", <4 x float> %".43")
  %".45" = shufflevector <4 x float> %".44", <4 x float> <float undef, float undef, float undef, float undef>, <2 x i32> <i32 0, i32 1>
  %".46" = shufflevector <4 x float> %".44", <4 x float> <float undef, float undef, float undef, float undef>, <2 x i32> <i32 2, i32 3>
  %".47" = call <2 x float> @"llvm.maximum.v2f32"(<2 x float> %".45", <2 x float> %".46")
  %".48" = extractelement <2 x float> %".47", i32 0
  %".49" = extractelement <2 x float> %".47", i32 1
  %".50" = call float @"llvm.maximum.f32"(float %".48", float %".49")
  %".51" = add nsw i64 0, 32
  %".52" = insertelement <5 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".51", i32 0
  %".53" = shufflevector <5 x i64> %".52", <5 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <5 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0>
  %".54" = add <5 x i64> %".53", <i64 0, i64 1, i64 2, i64 3, i64 4>
  %".55" = mul nsw i64 %"i0", 37
  %".56" = add nsw i64 %".55", %".51"
  %".57" = getelementptr inbounds float, ptr %"p0_x", i64 %".56"
  %".58" = load <5 x float>, ptr %".57", align 4
  %".59" = extractelement <5 x float> %".58", i32 4
  %".60" = shufflevector <5 x float> %".58", <5 x float> <float undef, float undef, float undef, float undef, float undef>, <2 x i32> <i32 0, i32 1>
  %".61" = shufflevector <5 x float> %".58", <5 x float> <float undef, float undef, float undef, float undef, float undef>, <2 x i32> <i32 2, i32 3>
  %".62" = call <2 x float> @"llvm.maximum.v2f32"(<2 x float> %".60", <2 x float> %".61")
  %".63" = extractelement <2 x float> %".62", i32 0
  %".64" = extractelement <2 x float> %".62", i32 1
  %".65" = call float @"llvm.maximum.f32"(float %".63", float %".64")
  %".66" = call float @"llvm.maximum.f32"(float %".65", float %".59")
  %".67" = call float @"llvm.maximum.f32"(float %".50", float %".66")
  %".68" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  %".69" = load float, ptr %".68", align 4
  %".70" = call float @"llvm.maximum.f32"(float %".69", float %".67")
  %".71" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  store float %".70", ptr %".71", align 4
  %".73" = add nsw i64 %"i0", 1
  br label %"i0.head"
i0.exit:
  %".75" = add i64 0, 16
  br label %"i0.head.1"
i0.head.1:
  %"i0.1" = phi  i64 [0, %"i0.exit"], [%".123", %"i1.exit"]
  %".77" = icmp slt i64 %"i0.1", %".75"
  br i1 %".77", label %"i0.body.1", label %"i0.exit.1"
i0.body.1:
  %".79" = add i64 0, 37
  br label %"i1.head"
i0.exit.1:
  %".125" = add i64 0, 16
  br label %"i0.head.2"
i1.head:
  %"i1" = phi  i64 [0, %"i0.body.1"], [%".121", %"i1.body"]
  %".81" = icmp slt i64 %"i1", %".79"
  br i1 %".81", label %"i1.body", label %"i1.exit"
i1.body:
  %".83" = mul nsw i64 %"i0.1", 37
  %".84" = add nsw i64 %".83", %"i1"
  %".85" = getelementptr inbounds float, ptr %"p0_x", i64 %".84"
  %".86" = load float, ptr %".85", align 4
  %".87" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0.1"
  %".88" = load float, ptr %".87", align 4
  %".89" = fsub contract float %".86", %".88"
  %".90" = call float @"llvm.minnum.f32"(float %".89", float 0x4056400000000000)
  %".91" = call float @"llvm.maxnum.f32"(float %".90", float 0xc05a000000000000)
  %".92" = fmul float %".91", 0x3ff7154760000000
  %".93" = call float @"llvm.rint.f32"(float %".92")
  %".94" = call float @"llvm.fmuladd.f32"(float %".93", float 0xbfe6300000000000, float %".91")
  %".95" = call float @"llvm.fmuladd.f32"(float %".93", float 0x3f2bd01060000000, float %".94")
  %".96" = call float @"llvm.fmuladd.f32"(float 0x3f2a0d2ce0000000, float %".95", float 0x3f56e879c0000000)
  %".97" = call float @"llvm.fmuladd.f32"(float %".96", float %".95", float 0x3f81112100000000)
  %".98" = call float @"llvm.fmuladd.f32"(float %".97", float %".95", float 0x3fa5553820000000)
  %".99" = call float @"llvm.fmuladd.f32"(float %".98", float %".95", float 0x3fc5555540000000)
  %".100" = call float @"llvm.fmuladd.f32"(float %".99", float %".95", float 0x3fe0000000000000)
  %".101" = fmul float %".95", %".95"
  %".102" = call float @"llvm.fmuladd.f32"(float %".100", float %".101", float %".95")
  %".103" = fadd float %".102", 0x3ff0000000000000
  %".104" = fptosi float %".93" to i32
  %".105" = ashr i32 %".104", 1
  %".106" = add i32 %".105", 127
  %".107" = shl i32 %".106", 23
  %".108" = bitcast i32 %".107" to float
  %".109" = fmul float %".103", %".108"
  %".110" = sub i32 %".104", %".105"
  %".111" = add i32 %".110", 127
  %".112" = shl i32 %".111", 23
  %".113" = bitcast i32 %".112" to float
  %".114" = fmul float %".109", %".113"
  %".115" = fcmp uno float %".89", %".89"
  %".116" = select  i1 %".115", float %".89", float %".114"
  %".117" = mul nsw i64 %"i0.1", 37
  %".118" = add nsw i64 %".117", %"i1"
  %".119" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".118"
  store float %".116", ptr %".119", align 4
  %".121" = add nsw i64 %"i1", 1
  br label %"i1.head"
i1.exit:
  %".123" = add nsw i64 %"i0.1", 1
  br label %"i0.head.1"
i0.head.2:
  %"i0.2" = phi  i64 [0, %"i0.exit.1"], [%".194", %"i0.body.2"]
  %".127" = icmp slt i64 %"i0.2", %".125"
  br i1 %".127", label %"i0.body.2", label %"i0.exit.2"
i0.body.2:
  %".129" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float              0x0, ptr %".129", align 4
  %".131" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".132" = mul nsw i64 %"i0.2", 37
  %".133" = add nsw i64 %".132", 0
  %".134" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".133"
  %".135" = load <8 x float>, ptr %".134", align 4
  %".136" = add nsw i64 0, 8
  %".137" = insertelement <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".136", i32 0
  %".138" = shufflevector <8 x i64> %".137", <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".139" = add <8 x i64> %".138", <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".140" = mul nsw i64 %"i0.2", 37
  %".141" = add nsw i64 %".140", %".136"
  %".142" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".141"
  %".143" = load <8 x float>, ptr %".142", align 4
  %".144" = add nsw i64 0, 16
  %".145" = insertelement <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".144", i32 0
  %".146" = shufflevector <8 x i64> %".145", <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".147" = add <8 x i64> %".146", <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".148" = mul nsw i64 %"i0.2", 37
  %".149" = add nsw i64 %".148", %".144"
  %".150" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".149"
  %".151" = load <8 x float>, ptr %".150", align 4
  %".152" = add nsw i64 0, 24
  %".153" = insertelement <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".152", i32 0
  %".154" = shufflevector <8 x i64> %".153", <8 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".155" = add <8 x i64> %".154", <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".156" = mul nsw i64 %"i0.2", 37
  %".157" = add nsw i64 %".156", %".152"
  %".158" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".157"
  %".159" = load <8 x float>, ptr %".158", align 4
  %".160" = fadd contract <8 x float> %".135", %".143"
  %".161" = fadd contract <8 x float> %".151", %".159"
  %".162" = fadd contract <8 x float> %".160", %".161"
  %".163" = shufflevector <8 x float> %".162", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <4 x i32> <i32 0, i32 1, i32 2, i32 3>
  %".164" = shufflevector <8 x float> %".162", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <4 x i32> <i32 4, i32 5, i32 6, i32 7>
  %".165" = fadd contract <4 x float> %".163", %".164"
  %".166" = shufflevector <4 x float> %".165", <4 x float> <float undef, float undef, float undef, float undef>, <2 x i32> <i32 0, i32 1>
  %".167" = shufflevector <4 x float> %".165", <4 x float> <float undef, float undef, float undef, float undef>, <2 x i32> <i32 2, i32 3>
  %".168" = fadd contract <2 x float> %".166", %".167"
  %".169" = extractelement <2 x float> %".168", i32 0
  %".170" = extractelement <2 x float> %".168", i32 1
  %".171" = fadd contract float %".169", %".170"
  %".172" = add nsw i64 0, 32
  %".173" = insertelement <5 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".172", i32 0
  %".174" = shufflevector <5 x i64> %".173", <5 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <5 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0>
  %".175" = add <5 x i64> %".174", <i64 0, i64 1, i64 2, i64 3, i64 4>
  %".176" = mul nsw i64 %"i0.2", 37
  %".177" = add nsw i64 %".176", %".172"
  %".178" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".177"
  %".179" = load <5 x float>, ptr %".178", align 4
  %".180" = extractelement <5 x float> %".179", i32 4
  %".181" = shufflevector <5 x float> %".179", <5 x float> <float undef, float undef, float undef, float undef, float undef>, <2 x i32> <i32 0, i32 1>
  %".182" = shufflevector <5 x float> %".179", <5 x float> <float undef, float undef, float undef, float undef, float undef>, <2 x i32> <i32 2, i32 3>
  %".183" = fadd contract <2 x float> %".181", %".182"
  %".184" = extractelement <2 x float> %".183", i32 0
  %".185" = extractelement <2 x float> %".183", i32 1
  %".186" = fadd contract float %".184", %".185"
  %".187" = fadd contract float %".186", %".180"
  %".188" = fadd contract float %".171", %".187"
  %".189" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  %".190" = load float, ptr %".189", align 4
  %".191" = fadd contract float %".190", %".188"
  %".192" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float %".191", ptr %".192", align 4
  %".194" = add nsw i64 %"i0.2", 1
  br label %"i0.head.2"
i0.exit.2:
  %".196" = add i64 0, 16
  br label %"i0.head.3"
i0.head.3:
  %"i0.3" = phi  i64 [0, %"i0.exit.2"], [%".217", %"i1.exit.1"]
  %".198" = icmp slt i64 %"i0.3", %".196"
  br i1 %".198", label %"i0.body.3", label %"i0.exit.3"
i0.body.3:
  %".200" = add i64 0, 37
  br label %"i1.head.1"
i0.exit.3:
  ret void
i1.head.1:
  %"i1.1" = phi  i64 [0, %"i0.body.3"], [%".215", %"i1.body.1"]
  %".202" = icmp slt i64 %"i1.1", %".200"
  br i1 %".202", label %"i1.body.1", label %"i1.exit.1"
i1.body.1:
  %".204" = mul nsw i64 %"i0.3", 37
  %".205" = add nsw i64 %".204", %"i1.1"
  %".206" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".205"
  %".207" = load float, ptr %".206", align 4
  %".208" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.3"
  %".209" = load float, ptr %".208", align 4
  %".210" = fdiv arcp float %".207", %".209"
  %".211" = mul nsw i64 %"i0.3", 37
  %".212" = add nsw i64 %".211", %"i1.1"
  %".213" = getelementptr inbounds float, ptr %"p1_softmax", i64 %".212"
  store float %".210", ptr %".213", align 4
  %".215" = add nsw i64 %"i1.1", 1
  br label %"i1.head.1"
i1.exit.1:
  %".217" = add nsw i64 %"i0.3", 1
  br label %"i0.head.3"
}

declare <8 x float> @"llvm.maximum.v8f32"(<8 x float> %".1", <8 x float> %".2")

declare <4 x float> @"llvm.maximum.v4f32"(<4 x float> %".1", <4 x float> %".2")

declare <2 x float> @"llvm.maximum.v2f32"(<2 x float> %".1", <2 x float> %".2")

declare float @"llvm.maximum.f32"(float %".1", float %".2")

declare float @"llvm.minnum.f32"(float %".1", float %".2")

declare float @"llvm.maxnum.f32"(float %".1", float %".2")

declare float @"llvm.rint.f32"(float %".1")

declare float @"llvm.fmuladd.f32"(float %".1", float %".2", float %".3")
