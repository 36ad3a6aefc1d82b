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
  %"i0.1" = phi  i64 [0, %"i0.exit"], [%".75", %"i1.exit"]
  %".29" = icmp slt i64 %"i0.1", %".27"
  br i1 %".29", label %"i0.body.1", label %"i0.exit.1"
i0.body.1:
  %".31" = add i64 0, 37
  br label %"i1.head"
i0.exit.1:
  %".77" = add i64 0, 16
  br label %"i0.head.2"
i1.head:
  %"i1" = phi  i64 [0, %"i0.body.1"], [%".73", %"i1.body"]
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
  %".46" = call float @"llvm.fmuladd.f32"(float %".45", float 0xbfe6300000000000, float %".43")
  %".47" = call float @"llvm.fmuladd.f32"(float %".45", float 0x3f2bd01060000000, float %".46")
  %".48" = call float @"llvm.fmuladd.f32"(float 0x3f2a0d2ce0000000, float %".47", float 0x3f56e879c0000000)
  %".49" = call float @"llvm.fmuladd.f32"(float %".48", float %".47", float 0x3f81112100000000)
  %".50" = call float @"llvm.fmuladd.f32"(float %".49", float %".47", float 0x3fa5553820000000)
  %".51" = call float @"llvm.fmuladd.f32"(float %".50", float %".47", float 0x3fc5555540000000)
  %".52" = call float @"llvm.fmuladd.f32"(float %".51", float %".47", float 0x3fe0000000000000)
  %".53" = fmul float %".47", %".47"
  %".54" = call float @"llvm.fmuladd.f32"(float %".52", float %".53", float %".47")
  %".55" = fadd float %".54", 0x3ff0000000000000
  %".56" = fptosi float %".45" to i32
  %".57" = ashr i32 %".56", 1
  %".58" = add i32 %".57", 127
  %".59" = shl i32 %".58", 23
  %".60" = bitcast i32 %".59" to float
  %".61" = fmul float %".55", %".60"
  %".62" = sub i32 %".56", %".57"
  %".63" = add i32 %".62", 127
  %".64" = shl i32 %".63", 23
  %".65" = bitcast i32 %".64" to float
  %".66" = fmul float %".61", %".65"
  %".67" = fcmp uno float %".41", %".41"
  %".68" = select  i1 %".67", float %".41", float %".66"
  %".69" = mul nsw i64 %"i0.1", 37
  %".70" = add nsw i64 %".69", %"i1"
  %".71" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".70"
  store float %".68", ptr %".71", align 4
  %".73" = add nsw i64 %"i1", 1
  br label %"i1.head"
i1.exit:
  %".75" = add nsw i64 %"i0.1", 1
  br label %"i0.head.1"
i0.head.2:
  %"i0.2" = phi  i64 [0, %"i0.exit.1"], [%".98", %"k.exit.1"]
  %".79" = icmp slt i64 %"i0.2", %".77"
  br i1 %".79", label %"i0.body.2", label %"i0.exit.2"
i0.body.2:
  %".81" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float              0x0, ptr %".81", align 4
  %".83" = add i64 0, 37
  br label %"k.head.1"
i0.exit.2:
  %".100" = add i64 0, 16
  br label %"i0.head.3"
k.head.1:
  %"k.1" = phi  i64 [0, %"i0.body.2"], [%".96", %"k.body.1"]
  %".85" = icmp slt i64 %"k.1", %".83"
  br i1 %".85", label %"k.body.1", label %"k.exit.1"
k.body.1:
  %".87" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  %".88" = load float, ptr %".87", align 4
  %".89" = mul nsw i64 %"i0.2", 37
  %".90" = add nsw i64 %".89", %"k.1"
  %".91" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".90"
  %".92" = load float, ptr %".91", align 4
  %".93" = fadd contract float %".88", %".92"
  %".94" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float %".93", ptr %".94", align 4
  %".96" = add nsw i64 %"k.1", 1
  br label %"k.head.1"
k.exit.1:
  %".98" = add nsw i64 %"i0.2", 1
  br label %"i0.head.2"
i0.head.3:
  %"i0.3" = phi  i64 [0, %"i0.exit.2"], [%".121", %"i1.exit.1"]
  %".102" = icmp slt i64 %"i0.3", %".100"
  br i1 %".102", label %"i0.body.3", label %"i0.exit.3"
i0.body.3:
  %".104" = add i64 0, 37
  br label %"i1.head.1"
i0.exit.3:
  ret void
i1.head.1:
  %"i1.1" = phi  i64 [0, %"i0.body.3"], [%".119", %"i1.body.1"]
  %".106" = icmp slt i64 %"i1.1", %".104"
  br i1 %".106", label %"i1.body.1", label %"i1.exit.1"
i1.body.1:
  %".108" = mul nsw i64 %"i0.3", 37
  %".109" = add nsw i64 %".108", %"i1.1"
  %".110" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".109"
  %".111" = load float, ptr %".110", align 4
  %".112" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.3"
  %".113" = load float, ptr %".112", align 4
  %".114" = fdiv float %".111", %".113"
  %".115" = mul nsw i64 %"i0.3", 37
  %".116" = add nsw i64 %".115", %"i1.1"
  %".117" = getelementptr inbounds float, ptr %"p1_softmax", i64 %".116"
  store float %".114", ptr %".117", align 4
  %".119" = add nsw i64 %"i1.1", 1
  br label %"i1.head.1"
i1.exit.1:
  %".121" = add nsw i64 %"i0.3", 1
  br label %"i0.head.3"
}

declare float @"llvm.maximum.f32"(float %".1", float %".2")

declare float @"llvm.minnum.f32"(float %".1", float %".2")

declare float @"llvm.maxnum.f32"(float %".1", float %".2")

declare float @"llvm.rint.f32"(float %".1")

declare float @"llvm.fmuladd.f32"(float %".1", float %".2", float %".3")
