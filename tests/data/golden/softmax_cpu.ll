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
  %"i0" = phi  i64 [0, %"start"], [%".58", %"i0.body"]
  %".6" = icmp slt i64 %"i0", %".4"
  br i1 %".6", label %"i0.body", label %"i0.exit"
i0.body:
  %".8" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  store float 0xfff0000000000000, ptr %".8", align 4
  %".10" = add <16 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7, i64 8, i64 9, i64 10, i64 11, i64 12, i64 13, i64 14, i64 15>
  %".11" = mul nsw i64 %"i0", 37
  %".12" = add nsw i64 %".11", 0
  %".13" = getelementptr inbounds float, ptr %"p0_x", i64 %".12"
  %".14" = load <16 x float>, ptr %".13", align 4
  %".15" = add nsw i64 0, 16
  %".16" = insertelement <16 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".15", i32 0
  %".17" = shufflevector <16 x i64> %".16", <16 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <16 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".18" = add <16 x i64> %".17", <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7, i64 8, i64 9, i64 10, i64 11, i64 12, i64 13, i64 14, i64 15>
  %".19" = mul nsw i64 %"i0", 37
  %".20" = add nsw i64 %".19", %".15"
  %".21" = getelementptr inbounds float, ptr %"p0_x", i64 %".20"
  %".22" = load <16 x float>, ptr %".21", align 4
  %".23" = call <16 x float> @"llvm.maximum.v16f32"(<16 x float> %".14", <16 x float> %".22")
  %".24" = shufflevector <16 x float> %".23", <16 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 4, i32 5, i32 6, i32 7>
  %".25" = shufflevector <16 x float> %".23", <16 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 8, i32 9, i32 10, i32 11, i32 12, i32 13, i32 14, i32 15>
  %".26" = call <8 x float> @"llvm.maximum.v8f32"(<8 x float> %".24", <8 x float> %".25")
  %".27" = shufflevector <8 x float> %".26", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <4 x i32> <i32 0, i32 1, i32 2, i32 3>
  %".28" = shufflevector <8 x float> %".26", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <4 x i32> <i32 4, i32 5, i32 6, i32 7>
  %".29" = call <4 x float> @"llvm.maximum.v4f32"(<4 x float> %".27", <4 x float> %".28")
  %".30" = shufflevector <4 x float> %".29", <4 x float> <float undef, float undef, float undef, float undef>, <2 x i32> <i32 0, i32 1>
  %".31" = shufflevector <4 x float> %".29", <4 x float> <float undef, float undef, float undef, float undef>, <2 x i32> <i32 2, i32 3>
  %".32" = call <2 x float> @"llvm.maximum.v2f32"(<2 x float> %".30", <2 x float> %".31")
  %".33" = extractelement <2 x float> %".32", i32 0
  %".34" = extractelement <2 x float> %".32", i32 1
  %".35" = call float @"llvm.maximum.f32"(float %".33", float %".34")
  %".36" = add nsw i64 0, 32
  %".37" = insertelement <5 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".36", i32 0
  %".38" = shufflevector <5 x i64> %".37", <5 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <5 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0>
  %".39" = add <5 x i64> %".38", <i64 0, i64 1, i64 2, i64 3, i64 4>
  %".40" = mul nsw i64 %"i0", 37
  %".41" = add nsw i64 %".40", %".36"
  %".42" = getelementptr inbounds float, ptr %"p0_x", i64 %".41"
  %".43" = load <5 x float>, ptr %".42", align 4
  %".44" = extractelement <5 x float> %".43", i32 4
  %".45" = shufflevector <5 x float> %".43", <5 x float> <float undef, float undef, float undef, float undef, float undef>, <2 x i32> <i32 0, i32 1>
  %".46" = shufflevector <5 x float> %".43", <5 x float> <float undef, float undef, float undef, float undef, float undef>, <2 x i32> <i32 2, i32 3>
  %".47" = call <2 x float> @"llvm.maximum.v2f32"(<2 x float> %".45", <2 x float> %".46")
  %".48" = extractelement <2 x float> %".47", i32 0
  %".49" = extractelement <2 x float> %".47", i32 1
  %".50" = call float @"llvm.maximum.f32"(float %".48", float %".49")
  %".51" = call float @"llvm.maximum.f32"(float %".50", float %".44")
  %".52" = call float @"llvm.maximum.f32"(float %".35", float %".51")
  %".53" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  %".54" = load float, ptr %".53", align 4
  %".55" = call float @"llvm.maximum.f32"(float %".54", float %".52")
  %".56" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  store float %".55", ptr %".56", align 4
  %".58" = add nsw i64 %"i0", 1
  br label %"i0.head"
i0.exit:
  %".60" = add i64 0, 16
  br label %"i0.head.1"
i0.head.1:
  %"i0.1" = phi  i64 [0, %"i0.exit"], [%".108", %"i1.exit"]
  %".62" = icmp slt i64 %"i0.1", %".60"
  br i1 %".62", label %"i0.body.1", label %"i0.exit.1"
i0.body.1:
  %".64" = add i64 0, 37
  br label %"i1.head"
i0.exit.1:
  %".110" = add i64 0, 16
  br label %"i0.head.2"
i1.head:
  %"i1" = phi  i64 [0, %"i0.body.1"], [%".106", %"i1.body"]
  %".66" = icmp slt i64 %"i1", %".64"
  br i1 %".66", label %"i1.body", label %"i1.exit"
i1.body:
  %".68" = mul nsw i64 %"i0.1", 37
  %".69" = add nsw i64 %".68", %"i1"
  %".70" = getelementptr inbounds float, ptr %"p0_x", i64 %".69"
  %".71" = load float, ptr %".70", align 4
  %".72" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0.1"
  %".73" = load float, ptr %".72", align 4
  %".74" = fsub contract float %".71", %".73"
  %".75" = call float @"llvm.minnum.f32"(float %".74", float 0x4056400000000000)
  %".76" = call float @"llvm.maxnum.f32"(float %".75", float 0xc05a000000000000)
  %".77" = fmul float %".76", 0x3ff7154760000000
  %".78" = call float @"llvm.rint.f32"(float %".77")
  %".79" = call float @"llvm.fmuladd.f32"(float %".78", float 0xbfe6300000000000, float %".76")
  %".80" = call float @"llvm.fmuladd.f32"(float %".78", float 0x3f2bd01060000000, float %".79")
  %".81" = call float @"llvm.fmuladd.f32"(float 0x3f2a0d2ce0000000, float %".80", float 0x3f56e879c0000000)
  %".82" = call float @"llvm.fmuladd.f32"(float %".81", float %".80", float 0x3f81112100000000)
  %".83" = call float @"llvm.fmuladd.f32"(float %".82", float %".80", float 0x3fa5553820000000)
  %".84" = call float @"llvm.fmuladd.f32"(float %".83", float %".80", float 0x3fc5555540000000)
  %".85" = call float @"llvm.fmuladd.f32"(float %".84", float %".80", float 0x3fe0000000000000)
  %".86" = fmul float %".80", %".80"
  %".87" = call float @"llvm.fmuladd.f32"(float %".85", float %".86", float %".80")
  %".88" = fadd float %".87", 0x3ff0000000000000
  %".89" = fptosi float %".78" to i32
  %".90" = ashr i32 %".89", 1
  %".91" = add i32 %".90", 127
  %".92" = shl i32 %".91", 23
  %".93" = bitcast i32 %".92" to float
  %".94" = fmul float %".88", %".93"
  %".95" = sub i32 %".89", %".90"
  %".96" = add i32 %".95", 127
  %".97" = shl i32 %".96", 23
  %".98" = bitcast i32 %".97" to float
  %".99" = fmul float %".94", %".98"
  %".100" = fcmp uno float %".74", %".74"
  %".101" = select  i1 %".100", float %".74", float %".99"
  %".102" = mul nsw i64 %"i0.1", 37
  %".103" = add nsw i64 %".102", %"i1"
  %".104" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".103"
  store float %".101", ptr %".104", align 4
  %".106" = add nsw i64 %"i1", 1
  br label %"i1.head"
i1.exit:
  %".108" = add nsw i64 %"i0.1", 1
  br label %"i0.head.1"
i0.head.2:
  %"i0.2" = phi  i64 [0, %"i0.exit.1"], [%".164", %"i0.body.2"]
  %".112" = icmp slt i64 %"i0.2", %".110"
  br i1 %".112", label %"i0.body.2", label %"i0.exit.2"
i0.body.2:
  %".114" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float              0x0, ptr %".114", align 4
  %".116" = add <16 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7, i64 8, i64 9, i64 10, i64 11, i64 12, i64 13, i64 14, i64 15>
  %".117" = mul nsw i64 %"i0.2", 37
  %".118" = add nsw i64 %".117", 0
  %".119" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".118"
  %".120" = load <16 x float>, ptr %".119", align 4
  %".121" = add nsw i64 0, 16
  %".122" = insertelement <16 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".121", i32 0
  %".123" = shufflevector <16 x i64> %".122", <16 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <16 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".124" = add <16 x i64> %".123", <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7, i64 8, i64 9, i64 10, i64 11, i64 12, i64 13, i64 14, i64 15>
  %".125" = mul nsw i64 %"i0.2", 37
  %".126" = add nsw i64 %".125", %".121"
  %".127" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".126"
  %".128" = load <16 x float>, ptr %".127", align 4
  %".129" = fadd contract <16 x float> %".120", %".128"
  %".130" = shufflevector <16 x float> %".129", <16 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 4, i32 5, i32 6, i32 7>
  %".131" = shufflevector <16 x float> %".129", <16 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 8, i32 9, i32 10, i32 11, i32 12, i32 13, i32 14, i32 15>
  %".132" = fadd contract <8 x float> %".130", %".131"
  %".133" = shufflevector <8 x float> %".132", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <4 x i32> <i32 0, i32 1, i32 2, i32 3>
  %".134" = shufflevector <8 x float> %".132", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <4 x i32> <i32 4, i32 5, i32 6, i32 7>
  %".135" = fadd contract <4 x float> %".133", %".134"
  %".136" = shufflevector <4 x float> %".135", <4 x float> <float undef, float undef, float undef, float undef>, <2 x i32> <i32 0, i32 1>
  %".137" = shufflevector <4 x float> %".135", <4 x float> <float undef, float undef, float undef, float undef>, <2 x i32> <i32 2, i32 3>
  %".138" = fadd contract <2 x float> %".136", %".137"
  %".139" = extractelement <2 x float> %".138", i32 0
  %".140" = extractelement <2 x float> %".138", i32 1
  %".141" = fadd contract float %".139", %".140"
  %".142" = add nsw i64 0, 32
  %".143" = insertelement <5 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, i64 %".142", i32 0
  %".144" = shufflevector <5 x i64> %".143", <5 x i64> <i64 undef, i64 undef, i64 undef, i64 undef, i64 undef>, <5 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0>
  %".145" = add <5 x i64> %".144", <i64 0, i64 1, i64 2, i64 3, i64 4>
  %".146" = mul nsw i64 %"i0.2", 37
  %".147" = add nsw i64 %".146", %".142"
  %".148" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".147"
  %".149" = load <5 x float>, ptr %".148", align 4
  %".150" = extractelement <5 x float> %".149", i32 4
  %".151" = shufflevector <5 x float> %".149", <5 x float> <float undef, float undef, float undef, float undef, float undef>, <2 x i32> <i32 0, i32 1>
  %".152" = shufflevector <5 x float> %".149", <5 x float> <float undef, float undef, float undef, float undef, float undef>, <2 x i32> <i32 2, i32 3>
  %".153" = fadd contract <2 x float> %".151", %".152"
  %".154" = extractelement <2 x float> %".153", i32 0
  %".155" = extractelement <2 x float> %".153", i32 1
  %".156" = fadd contract float %".154", %".155"
  %".157" = fadd contract float %".156", %".150"
  %".158" = fadd contract float %".141", %".157"
  %".159" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  %".160" = load float, ptr %".159", align 4
  %".161" = fadd contract float %".160", %".158"
  %".162" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float %".161", ptr %".162", align 4
  %".164" = add nsw i64 %"i0.2", 1
  br label %"i0.head.2"
i0.exit.2:
  %".166" = add i64 0, 16
  br label %"i0.head.3"
i0.head.3:
  %"i0.3" = phi  i64 [0, %"i0.exit.2"], [%".187", %"i1.exit.1"]
  %".168" = icmp slt i64 %"i0.3", %".166"
  br i1 %".168", label %"i0.body.3", label %"i0.exit.3"
i0.body.3:
  %".170" = add i64 0, 37
  br label %"i1.head.1"
i0.exit.3:
  ret void
i1.head.1:
  %"i1.1" = phi  i64 [0, %"i0.body.3"], [%".185", %"i1.body.1"]
  %".172" = icmp slt i64 %"i1.1", %".170"
  br i1 %".172", label %"i1.body.1", label %"i1.exit.1"
i1.body.1:
  %".174" = mul nsw i64 %"i0.3", 37
  %".175" = add nsw i64 %".174", %"i1.1"
  %".176" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".175"
  %".177" = load float, ptr %".176", align 4
  %".178" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.3"
  %".179" = load float, ptr %".178", align 4
  %".180" = fdiv float %".177", %".179"
  %".181" = mul nsw i64 %"i0.3", 37
  %".182" = add nsw i64 %".181", %"i1.1"
  %".183" = getelementptr inbounds float, ptr %"p1_softmax", i64 %".182"
  store float %".180", ptr %".183", align 4
  %".185" = add nsw i64 %"i1.1", 1
  br label %"i1.head.1"
i1.exit.1:
  %".187" = add nsw i64 %"i0.3", 1
  br label %"i0.head.3"
}

declare <16 x float> @"llvm.maximum.v16f32"(<16 x float> %".1", <16 x float> %".2")

declare <8 x float> @"llvm.maximum.v8f32"(<8 x float> %".1", <8 x float> %".2")

declare <4 x float> @"llvm.maximum.v4f32"(<4 x float> %".1", <4 x float> %".2")

declare <2 x float> @"llvm.maximum.v2f32"(<2 x float> %".1", <2 x float> %".2")

declare float @"llvm.maximum.f32"(float %".1", float %".2")

declare float @"llvm.minnum.f32"(float %".1", float %".2")

declare float @"llvm.maxnum.f32"(float %".1", float %".2")

declare float @"llvm.rint.f32"(float %".1")

declare float @"llvm.fmuladd.f32"(float %".1", float %".2", float %".3")
