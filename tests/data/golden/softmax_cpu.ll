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
  %"i0" = phi  i64 [0, %"start"], [%".25", %"k.exit"]
  %".6" = icmp slt i64 %"i0", %".4"
  br i1 %".6", label %"i0.body", label %"i0.exit"
i0.body:
  %".8" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  store float 0xfff0000000000000, ptr %".8", align 4
  %".10" = add i64 0, 37
  br label %"k.head"
i0.exit:
  %".27" = add i64 0, 16
  br label %"i0.head.1"
k.head:
  %"k" = phi  i64 [0, %"i0.body"], [%".23", %"k.body"]
  %".12" = icmp slt i64 %"k", %".10"
  br i1 %".12", label %"k.body", label %"k.exit"
k.body:
  %".14" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  %".15" = load float, ptr %".14", align 4
  %".16" = mul nsw i64 %"i0", 37
  %".17" = add nsw i64 %".16", %"k"
  %".18" = getelementptr inbounds float, ptr %"p0_x", i64 %".17"
  %".19" = load float, ptr %".18", align 4
  %".20" = call float @"llvm.maximum.f32"(float %".15", float %".19")
  %".21" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0"
  store float %".20", ptr %".21", align 4
  %".23" = add nsw i64 %"k", 1
  br label %"k.head"
k.exit:
  %".25" = add nsw i64 %"i0", 1
  br label %"i0.head"
i0.head.1:
  %"i0.1" = phi  i64 [0, %"i0.exit"], [%".83", %"i1.exit"]
  %".29" = icmp slt i64 %"i0.1", %".27"
  br i1 %".29", label %"i0.body.1", label %"i0.exit.1"
i0.body.1:
  %".31" = add i64 0, 37
  br label %"i1.head"
i0.exit.1:
  %".85" = add i64 0, 16
  br label %"i0.head.2"
i1.head:
  %"i1" = phi  i64 [0, %"i0.body.1"], [%".81", %"i1.body"]
  %".33" = icmp slt i64 %"i1", %".31"
  br i1 %".33", label %"i1.body", label %"i1.exit"
i1.body:
  %".35" = mul nsw i64 %"i0.1", 37
  %".36" = add nsw i64 %".35", %"i1"
  %".37" = getelementptr inbounds float, ptr %"p0_x", i64 %".36"
  %".38" = load float, ptr %".37", align 4
  %".39" = getelementptr inbounds float, ptr %"softmax_max", i64 %"i0.1"
  %".40" = load float, ptr %".39", align 4
  %".41" = fsub contract float %".38", %".40"
  %".42" = call float @"llvm.minnum.f32"(float %".41", float 0x4056400000000000)
  %".43" = call float @"llvm.maxnum.f32"(float %".42", float 0xc05a000000000000)
  %".44" = fmul float %".43", 0x3ff7154760000000
  %".45" = call float @"llvm.rint.f32"(float %".44")
  %".46" = fmul float %".45", 0x3fe6300000000000
  %".47" = fsub float %".43", %".46"
  %".48" = fmul float %".45", 0xbf2bd01060000000
  %".49" = fsub float %".47", %".48"
  %".50" = fmul float 0x3f2a0d2ce0000000, %".49"
  %".51" = fadd float %".50", 0x3f56e879c0000000
  %".52" = fmul float %".51", %".49"
  %".53" = fadd float %".52", 0x3f81112100000000
  %".54" = fmul float %".53", %".49"
  %".55" = fadd float %".54", 0x3fa5553820000000
  %".56" = fmul float %".55", %".49"
  %".57" = fadd float %".56", 0x3fc5555540000000
  %".58" = fmul float %".57", %".49"
  %".59" = fadd float %".58", 0x3fe0000000000000
  %".60" = fmul float %".49", %".49"
  %".61" = fmul float %".59", %".60"
  %".62" = fadd float %".61", %".49"
  %".63" = fadd float %".62", 0x3ff0000000000000
  %".64" = fptosi float %".45" to i32
  %".65" = ashr i32 %".64", 1
  %".66" = add i32 %".65", 127
  %".67" = shl i32 %".66", 23
  %".68" = bitcast i32 %".67" to float
  %".69" = fmul float %".63", %".68"
  %".70" = sub i32 %".64", %".65"
  %".71" = add i32 %".70", 127
  %".72" = shl i32 %".71", 23
  %".73" = bitcast i32 %".72" to float
  %".74" = fmul float %".69", %".73"
  %".75" = fcmp uno float %".41", %".41"
  %".76" = select  i1 %".75", float %".41", float %".74"
  %".77" = mul nsw i64 %"i0.1", 37
  %".78" = add nsw i64 %".77", %"i1"
  %".79" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".78"
  store float %".76", ptr %".79", align 4
  %".81" = add nsw i64 %"i1", 1
  br label %"i1.head"
i1.exit:
  %".83" = add nsw i64 %"i0.1", 1
  br label %"i0.head.1"
i0.head.2:
  %"i0.2" = phi  i64 [0, %"i0.exit.1"], [%".106", %"k.exit.1"]
  %".87" = icmp slt i64 %"i0.2", %".85"
  br i1 %".87", label %"i0.body.2", label %"i0.exit.2"
i0.body.2:
  %".89" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float              0x0, ptr %".89", align 4
  %".91" = add i64 0, 37
  br label %"k.head.1"
i0.exit.2:
  %".108" = add i64 0, 16
  br label %"i0.head.3"
k.head.1:
  %"k.1" = phi  i64 [0, %"i0.body.2"], [%".104", %"k.body.1"]
  %".93" = icmp slt i64 %"k.1", %".91"
  br i1 %".93", label %"k.body.1", label %"k.exit.1"
k.body.1:
  %".95" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  %".96" = load float, ptr %".95", align 4
  %".97" = mul nsw i64 %"i0.2", 37
  %".98" = add nsw i64 %".97", %"k.1"
  %".99" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".98"
  %".100" = load float, ptr %".99", align 4
  %".101" = fadd contract float %".96", %".100"
  %".102" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float %".101", ptr %".102", align 4
  %".104" = add nsw i64 %"k.1", 1
  br label %"k.head.1"
k.exit.1:
  %".106" = add nsw i64 %"i0.2", 1
  br label %"i0.head.2"
i0.head.3:
  %"i0.3" = phi  i64 [0, %"i0.exit.2"], [%".129", %"i1.exit.1"]
  %".110" = icmp slt i64 %"i0.3", %".108"
  br i1 %".110", label %"i0.body.3", label %"i0.exit.3"
i0.body.3:
  %".112" = add i64 0, 37
  br label %"i1.head.1"
i0.exit.3:
  ret void
i1.head.1:
  %"i1.1" = phi  i64 [0, %"i0.body.3"], [%".127", %"i1.body.1"]
  %".114" = icmp slt i64 %"i1.1", %".112"
  br i1 %".114", label %"i1.body.1", label %"i1.exit.1"
i1.body.1:
  %".116" = mul nsw i64 %"i0.3", 37
  %".117" = add nsw i64 %".116", %"i1.1"
  %".118" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".117"
  %".119" = load float, ptr %".118", align 4
  %".120" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.3"
  %".121" = load float, ptr %".120", align 4
  %".122" = fdiv float %".119", %".121"
  %".123" = mul nsw i64 %"i0.3", 37
  %".124" = add nsw i64 %".123", %"i1.1"
  %".125" = getelementptr inbounds float, ptr %"p1_softmax", i64 %".124"
  store float %".122", ptr %".125", align 4
  %".127" = add nsw i64 %"i1.1", 1
  br label %"i1.head.1"
i1.exit.1:
  %".129" = add nsw i64 %"i0.3", 1
  br label %"i0.head.3"
}

declare float @"llvm.maximum.f32"(float %".1", float %".2")

declare float @"llvm.minnum.f32"(float %".1", float %".2")

declare float @"llvm.maxnum.f32"(float %".1", float %".2")

declare float @"llvm.rint.f32"(float %".1")
