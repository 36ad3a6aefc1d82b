; tecomp golden, made with llvmlite 0.50.0 (LLVM 22.1.0)
; ModuleID = "tecomp_f9f36c2669c7"

define void @"tecomp_f9f36c2669c7"(ptr noalias %"p0_A", ptr noalias %"p1_B", ptr noalias %"p2_matmul") nounwind
{
entry:
  %"B_global" = alloca [1920 x float], align 64
  %"closure" = alloca {i64, ptr, ptr, ptr}
  br label %"start"
start:
  %".5" = add i64 0, 6
  br label %"ax0.head"
ax0.head:
  %"ax0" = phi  i64 [0, %"start"], [%".33", %"ax1.exit"]
  %".7" = icmp slt i64 %"ax0", %".5"
  br i1 %".7", label %"ax0.body", label %"ax0.exit"
ax0.body:
  %".9" = add i64 0, 40
  br label %"ax1.head"
ax0.exit:
  %".35" = getelementptr inbounds {i64, ptr, ptr, ptr}, ptr %"closure", i32 0, i32 0
  store i64 0, ptr %".35"
  %".37" = getelementptr inbounds {i64, ptr, ptr, ptr}, ptr %"closure", i32 0, i32 1
  store ptr %"p0_A", ptr %".37"
  %".39" = getelementptr inbounds {i64, ptr, ptr, ptr}, ptr %"closure", i32 0, i32 2
  store ptr %"B_global", ptr %".39"
  %".41" = getelementptr inbounds {i64, ptr, ptr, ptr}, ptr %"closure", i32 0, i32 3
  store ptr %"p2_matmul", ptr %".41"
  call void @"tecomp_parallel_for"(void (i64, i64, ptr)* @"tecomp_f9f36c2669c7.par0", ptr %"closure", i64 6)
  ret void
ax1.head:
  %"ax1" = phi  i64 [0, %"ax0.body"], [%".31", %"ax2.exit"]
  %".11" = icmp slt i64 %"ax1", %".9"
  br i1 %".11", label %"ax1.body", label %"ax1.exit"
ax1.body:
  %".13" = add i64 0, 8
  br label %"ax2.head"
ax1.exit:
  %".33" = add nsw i64 %"ax0", 1
  br label %"ax0.head"
ax2.head:
  %"ax2" = phi  i64 [0, %"ax1.body"], [%".29", %"ax2.body"]
  %".15" = icmp slt i64 %"ax2", %".13"
  br i1 %".15", label %"ax2.body", label %"ax2.exit"
ax2.body:
  %".17" = mul nsw i64 %"ax1", 48
  %".18" = mul i64 %"ax0", 8
  %".19" = add i64 %".18", %"ax2"
  %".20" = add nsw i64 %".17", %".19"
  %".21" = getelementptr inbounds float, ptr %"p1_B", i64 %".20"
  %".22" = load float, ptr %".21", align 4
  %".23" = mul nsw i64 %"ax0", 320
  %".24" = mul nsw i64 %"ax1", 8
  %".25" = add nsw i64 %".23", %".24"
  %".26" = add nsw i64 %".25", %"ax2"
  %".27" = getelementptr inbounds float, ptr %"B_global", i64 %".26"
  store float %".22", ptr %".27", align 4
  %".29" = add nsw i64 %"ax2", 1
  br label %"ax2.head"
ax2.exit:
  %".31" = add nsw i64 %"ax1", 1
  br label %"ax1.head"
}

define internal void @"tecomp_f9f36c2669c7.par0.body"(i64 %"lo", i64 %"hi", i64 %"begin", ptr noalias %"A", ptr noalias %"B_global", ptr noalias %"matmul") nounwind
{
entry:
  %"matmul_local" = alloca [32 x float], align 64
  br label %"start"
start:
  %".8" = add nsw i64 %"begin", %"lo"
  %".9" = sub nsw i64 %"hi", %"lo"
  %".10" = add i64 %".8", %".9"
  br label %"j_0.head"
j_0.head:
  %"j_0" = phi  i64 [%".8", %"start"], [%".288", %"i_0.exit"]
  %".12" = icmp slt i64 %"j_0", %".10"
  br i1 %".12", label %"j_0.body", label %"j_0.exit"
j_0.body:
  %".14" = add i64 0, 16
  br label %"i_0.head"
j_0.exit:
  ret void
i_0.head:
  %"i_0" = phi  i64 [0, %"j_0.body"], [%".286", %"i_1.exit"]
  %".16" = icmp slt i64 %"i_0", %".14"
  br i1 %".16", label %"i_0.body", label %"i_0.exit"
i_0.body:
  %".18" = add i64 0, 4
  br label %"i.head"
i_0.exit:
  %".288" = add nsw i64 %"j_0", 1
  br label %"j_0.head"
i.head:
  %"i" = phi  i64 [0, %"i_0.body"], [%".27", %"i.body"]
  %".20" = icmp slt i64 %"i", %".18"
  br i1 %".20", label %"i.body", label %"i.exit"
i.body:
  %".22" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".23" = mul nsw i64 %"i", 8
  %".24" = add nsw i64 %".23", 0
  %".25" = getelementptr inbounds float, ptr %"matmul_local", i64 %".24"
  store <8 x float> <float              0x0, float              0x0, float              0x0, float              0x0, float              0x0, float              0x0, float              0x0, float              0x0>, ptr %".25", align 4
  %".27" = add nsw i64 %"i", 1
  br label %"i.head"
i.exit:
  %".29" = add i64 0, 20
  br label %"k_0.head"
k_0.head:
  %"k_0" = phi  i64 [0, %"i.exit"], [%".265", %"k_0.body"]
  %".31" = icmp slt i64 %"k_0", %".29"
  br i1 %".31", label %"k_0.body", label %"k_0.exit"
k_0.body:
  %".33" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".34" = mul nsw i64 0, 8
  %".35" = add nsw i64 %".34", 0
  %".36" = getelementptr inbounds float, ptr %"matmul_local", i64 %".35"
  %".37" = load <8 x float>, ptr %".36", align 4
  %".38" = mul i64 %"i_0", 4
  %".39" = add i64 %".38", 0
  %".40" = mul nsw i64 %".39", 40
  %".41" = mul i64 %"k_0", 2
  %".42" = add i64 %".41", 0
  %".43" = add nsw i64 %".40", %".42"
  %".44" = getelementptr inbounds float, ptr %"A", i64 %".43"
  %".45" = load float, ptr %".44", align 4
  %".46" = insertelement <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, float %".45", i32 0
  %".47" = shufflevector <8 x float> %".46", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".48" = mul nsw i64 %"j_0", 320
  %".49" = mul i64 %"k_0", 2
  %".50" = add i64 %".49", 0
  %".51" = mul nsw i64 %".50", 8
  %".52" = add nsw i64 %".48", %".51"
  %".53" = add nsw i64 %".52", 0
  %".54" = getelementptr inbounds float, ptr %"B_global", i64 %".53"
  %".55" = load <8 x float>, ptr %".54", align 4
  %".56" = fmul contract <8 x float> %".47", %".55"
  %".57" = fadd contract <8 x float> %".37", %".56"
  %".58" = mul nsw i64 0, 8
  %".59" = add nsw i64 %".58", 0
  %".60" = getelementptr inbounds float, ptr %"matmul_local", i64 %".59"
  store <8 x float> %".57", ptr %".60", align 4
  %".62" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".63" = mul nsw i64 1, 8
  %".64" = add nsw i64 %".63", 0
  %".65" = getelementptr inbounds float, ptr %"matmul_local", i64 %".64"
  %".66" = load <8 x float>, ptr %".65", align 4
  %".67" = mul i64 %"i_0", 4
  %".68" = add i64 %".67", 1
  %".69" = mul nsw i64 %".68", 40
  %".70" = mul i64 %"k_0", 2
  %".71" = add i64 %".70", 0
  %".72" = add nsw i64 %".69", %".71"
  %".73" = getelementptr inbounds float, ptr %"A", i64 %".72"
  %".74" = load float, ptr %".73", align 4
  %".75" = insertelement <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, float %".74", i32 0
  %".76" = shufflevector <8 x float> %".75", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".77" = mul nsw i64 %"j_0", 320
  %".78" = mul i64 %"k_0", 2
  %".79" = add i64 %".78", 0
  %".80" = mul nsw i64 %".79", 8
  %".81" = add nsw i64 %".77", %".80"
  %".82" = add nsw i64 %".81", 0
  %".83" = getelementptr inbounds float, ptr %"B_global", i64 %".82"
  %".84" = load <8 x float>, ptr %".83", align 4
  %".85" = fmul contract <8 x float> %".76", %".84"
  %".86" = fadd contract <8 x float> %".66", %".85"
  %".87" = mul nsw i64 1, 8
  %".88" = add nsw i64 %".87", 0
  %".89" = getelementptr inbounds float, ptr %"matmul_local", i64 %".88"
  store <8 x float> %".86", ptr %".89", align 4
  %".91" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".92" = mul nsw i64 2, 8
  %".93" = add nsw i64 %".92", 0
  %".94" = getelementptr inbounds float, ptr %"matmul_local", i64 %".93"
  %".95" = load <8 x float>, ptr %".94", align 4
  %".96" = mul i64 %"i_0", 4
  %".97" = add i64 %".96", 2
  %".98" = mul nsw i64 %".97", 40
  %".99" = mul i64 %"k_0", 2
  %".100" = add i64 %".99", 0
  %".101" = add nsw i64 %".98", %".100"
  %".102" = getelementptr inbounds float, ptr %"A", i64 %".101"
  %".103" = load float, ptr %".102", align 4
  %".104" = insertelement <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, float %".103", i32 0
  %".105" = shufflevector <8 x float> %".104", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".106" = mul nsw i64 %"j_0", 320
  %".107" = mul i64 %"k_0", 2
  %".108" = add i64 %".107", 0
  %".109" = mul nsw i64 %".108", 8
  %".110" = add nsw i64 %".106", %".109"
  %".111" = add nsw i64 %".110", 0
  %".112" = getelementptr inbounds float, ptr %"B_global", i64 %".111"
  %".113" = load <8 x float>, ptr %".112", align 4
  %".114" = fmul contract <8 x float> %".105", %".113"
  %".115" = fadd contract <8 x float> %".95", %".114"
  %".116" = mul nsw i64 2, 8
  %".117" = add nsw i64 %".116", 0
  %".118" = getelementptr inbounds float, ptr %"matmul_local", i64 %".117"
  store <8 x float> %".115", ptr %".118", align 4
  %".120" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".121" = mul nsw i64 3, 8
  %".122" = add nsw i64 %".121", 0
  %".123" = getelementptr inbounds float, ptr %"matmul_local", i64 %".122"
  %".124" = load <8 x float>, ptr %".123", align 4
  %".125" = mul i64 %"i_0", 4
  %".126" = add i64 %".125", 3
  %".127" = mul nsw i64 %".126", 40
  %".128" = mul i64 %"k_0", 2
  %".129" = add i64 %".128", 0
  %".130" = add nsw i64 %".127", %".129"
  %".131" = getelementptr inbounds float, ptr %"A", i64 %".130"
  %".132" = load float, ptr %".131", align 4
  %".133" = insertelement <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, float %".132", i32 0
  %".134" = shufflevector <8 x float> %".133", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".135" = mul nsw i64 %"j_0", 320
  %".136" = mul i64 %"k_0", 2
  %".137" = add i64 %".136", 0
  %".138" = mul nsw i64 %".137", 8
  %".139" = add nsw i64 %".135", %".138"
  %".140" = add nsw i64 %".139", 0
  %".141" = getelementptr inbounds float, ptr %"B_global", i64 %".140"
  %".142" = load <8 x float>, ptr %".141", align 4
  %".143" = fmul contract <8 x float> %".134", %".142"
  %".144" = fadd contract <8 x float> %".124", %".143"
  %".145" = mul nsw i64 3, 8
  %".146" = add nsw i64 %".145", 0
  %".147" = getelementptr inbounds float, ptr %"matmul_local", i64 %".146"
  store <8 x float> %".144", ptr %".147", align 4
  %".149" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".150" = mul nsw i64 0, 8
  %".151" = add nsw i64 %".150", 0
  %".152" = getelementptr inbounds float, ptr %"matmul_local", i64 %".151"
  %".153" = load <8 x float>, ptr %".152", align 4
  %".154" = mul i64 %"i_0", 4
  %".155" = add i64 %".154", 0
  %".156" = mul nsw i64 %".155", 40
  %".157" = mul i64 %"k_0", 2
  %".158" = add i64 %".157", 1
  %".159" = add nsw i64 %".156", %".158"
  %".160" = getelementptr inbounds float, ptr %"A", i64 %".159"
  %".161" = load float, ptr %".160", align 4
  %".162" = insertelement <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, float %".161", i32 0
  %".163" = shufflevector <8 x float> %".162", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".164" = mul nsw i64 %"j_0", 320
  %".165" = mul i64 %"k_0", 2
  %".166" = add i64 %".165", 1
  %".167" = mul nsw i64 %".166", 8
  %".168" = add nsw i64 %".164", %".167"
  %".169" = add nsw i64 %".168", 0
  %".170" = getelementptr inbounds float, ptr %"B_global", i64 %".169"
  %".171" = load <8 x float>, ptr %".170", align 4
  %".172" = fmul contract <8 x float> %".163", %".171"
  %".173" = fadd contract <8 x float> %".153", %".172"
  %".174" = mul nsw i64 0, 8
  %".175" = add nsw i64 %".174", 0
  %".176" = getelementptr inbounds float, ptr %"matmul_local", i64 %".175"
  store <8 x float> %".173", ptr %".176", align 4
  %".178" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".179" = mul nsw i64 1, 8
  %".180" = add nsw i64 %".179", 0
  %".181" = getelementptr inbounds float, ptr %"matmul_local", i64 %".180"
  %".182" = load <8 x float>, ptr %".181", align 4
  %".183" = mul i64 %"i_0", 4
  %".184" = add i64 %".183", 1
  %".185" = mul nsw i64 %".184", 40
  %".186" = mul i64 %"k_0", 2
  %".187" = add i64 %".186", 1
  %".188" = add nsw i64 %".185", %".187"
  %".189" = getelementptr inbounds float, ptr %"A", i64 %".188"
  %".190" = load float, ptr %".189", align 4
  %".191" = insertelement <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, float %".190", i32 0
  %".192" = shufflevector <8 x float> %".191", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".193" = mul nsw i64 %"j_0", 320
  %".194" = mul i64 %"k_0", 2
  %".195" = add i64 %".194", 1
  %".196" = mul nsw i64 %".195", 8
  %".197" = add nsw i64 %".193", %".196"
  %".198" = add nsw i64 %".197", 0
  %".199" = getelementptr inbounds float, ptr %"B_global", i64 %".198"
  %".200" = load <8 x float>, ptr %".199", align 4
  %".201" = fmul contract <8 x float> %".192", %".200"
  %".202" = fadd contract <8 x float> %".182", %".201"
  %".203" = mul nsw i64 1, 8
  %".204" = add nsw i64 %".203", 0
  %".205" = getelementptr inbounds float, ptr %"matmul_local", i64 %".204"
  store <8 x float> %".202", ptr %".205", align 4
  %".207" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".208" = mul nsw i64 2, 8
  %".209" = add nsw i64 %".208", 0
  %".210" = getelementptr inbounds float, ptr %"matmul_local", i64 %".209"
  %".211" = load <8 x float>, ptr %".210", align 4
  %".212" = mul i64 %"i_0", 4
  %".213" = add i64 %".212", 2
  %".214" = mul nsw i64 %".213", 40
  %".215" = mul i64 %"k_0", 2
  %".216" = add i64 %".215", 1
  %".217" = add nsw i64 %".214", %".216"
  %".218" = getelementptr inbounds float, ptr %"A", i64 %".217"
  %".219" = load float, ptr %".218", align 4
  %".220" = insertelement <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, float %".219", i32 0
  %".221" = shufflevector <8 x float> %".220", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".222" = mul nsw i64 %"j_0", 320
  %".223" = mul i64 %"k_0", 2
  %".224" = add i64 %".223", 1
  %".225" = mul nsw i64 %".224", 8
  %".226" = add nsw i64 %".222", %".225"
  %".227" = add nsw i64 %".226", 0
  %".228" = getelementptr inbounds float, ptr %"B_global", i64 %".227"
  %".229" = load <8 x float>, ptr %".228", align 4
  %".230" = fmul contract <8 x float> %".221", %".229"
  %".231" = fadd contract <8 x float> %".211", %".230"
  %".232" = mul nsw i64 2, 8
  %".233" = add nsw i64 %".232", 0
  %".234" = getelementptr inbounds float, ptr %"matmul_local", i64 %".233"
  store <8 x float> %".231", ptr %".234", align 4
  %".236" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".237" = mul nsw i64 3, 8
  %".238" = add nsw i64 %".237", 0
  %".239" = getelementptr inbounds float, ptr %"matmul_local", i64 %".238"
  %".240" = load <8 x float>, ptr %".239", align 4
  %".241" = mul i64 %"i_0", 4
  %".242" = add i64 %".241", 3
  %".243" = mul nsw i64 %".242", 40
  %".244" = mul i64 %"k_0", 2
  %".245" = add i64 %".244", 1
  %".246" = add nsw i64 %".243", %".245"
  %".247" = getelementptr inbounds float, ptr %"A", i64 %".246"
  %".248" = load float, ptr %".247", align 4
  %".249" = insertelement <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, float %".248", i32 0
  %".250" = shufflevector <8 x float> %".249", <8 x float> <float undef, float undef, float undef, float undef, float undef, float undef, float undef, float undef>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
  %".251" = mul nsw i64 %"j_0", 320
  %".252" = mul i64 %"k_0", 2
  %".253" = add i64 %".252", 1
  %".254" = mul nsw i64 %".253", 8
  %".255" = add nsw i64 %".251", %".254"
  %".256" = add nsw i64 %".255", 0
  %".257" = getelementptr inbounds float, ptr %"B_global", i64 %".256"
  %".258" = load <8 x float>, ptr %".257", align 4
  %".259" = fmul contract <8 x float> %".250", %".258"
  %".260" = fadd contract <8 x float> %".240", %".259"
  %".261" = mul nsw i64 3, 8
  %".262" = add nsw i64 %".261", 0
  %".263" = getelementptr inbounds float, ptr %"matmul_local", i64 %".262"
  store <8 x float> %".260", ptr %".263", align 4
  %".265" = add nsw i64 %"k_0", 1
  br label %"k_0.head"
k_0.exit:
  %".267" = add i64 0, 4
  br label %"i_1.head"
i_1.head:
  %"i_1" = phi  i64 [0, %"k_0.exit"], [%".284", %"i_1.body"]
  %".269" = icmp slt i64 %"i_1", %".267"
  br i1 %".269", label %"i_1.body", label %"i_1.exit"
i_1.body:
  %".271" = add <8 x i64> <i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0>, <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7>
  %".272" = mul nsw i64 %"i_1", 8
  %".273" = add nsw i64 %".272", 0
  %".274" = getelementptr inbounds float, ptr %"matmul_local", i64 %".273"
  %".275" = load <8 x float>, ptr %".274", align 4
  %".276" = mul i64 %"i_0", 4
  %".277" = add i64 %".276", %"i_1"
  %".278" = mul nsw i64 %".277", 48
  %".279" = mul i64 %"j_0", 8
  %".280" = add i64 %".279", 0
  %".281" = add nsw i64 %".278", %".280"
  %".282" = getelementptr inbounds float, ptr %"matmul", i64 %".281"
  store <8 x float> %".275", ptr %".282", align 4
  %".284" = add nsw i64 %"i_1", 1
  br label %"i_1.head"
i_1.exit:
  %".286" = add nsw i64 %"i_0", 1
  br label %"i_0.head"
}

define internal void @"tecomp_f9f36c2669c7.par0"(i64 %"lo", i64 %"hi", ptr %"closure") nounwind
{
entry:
  %".5" = getelementptr inbounds {i64, ptr, ptr, ptr}, ptr %"closure", i32 0, i32 0
  %".6" = load i64, ptr %".5"
  %".7" = getelementptr inbounds {i64, ptr, ptr, ptr}, ptr %"closure", i32 0, i32 1
  %".8" = load ptr, ptr %".7"
  %".9" = getelementptr inbounds {i64, ptr, ptr, ptr}, ptr %"closure", i32 0, i32 2
  %".10" = load ptr, ptr %".9"
  %".11" = getelementptr inbounds {i64, ptr, ptr, ptr}, ptr %"closure", i32 0, i32 3
  %".12" = load ptr, ptr %".11"
  call void @"tecomp_f9f36c2669c7.par0.body"(i64 %"lo", i64 %"hi", i64 %".6", ptr %".8", ptr %".10", ptr %".12")
  ret void
}

declare void @"tecomp_parallel_for"(ptr %".1", ptr %".2", i64 %".3")
