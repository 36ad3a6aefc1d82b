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
  %"i0.1" = phi  i64 [0, %"i0.exit"], [%".49", %"i1.exit"]
  %".29" = icmp slt i64 %"i0.1", %".27"
  br i1 %".29", label %"i0.body.1", label %"i0.exit.1"
i0.body.1:
  %".31" = add i64 0, 37
  br label %"i1.head"
i0.exit.1:
  %".51" = add i64 0, 16
  br label %"i0.head.2"
i1.head:
  %"i1" = phi  i64 [0, %"i0.body.1"], [%".47", %"i1.body"]
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
  %".42" = call float @"llvm.exp.f32"(float %".41")
  %".43" = mul nsw i64 %"i0.1", 37
  %".44" = add nsw i64 %".43", %"i1"
  %".45" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".44"
  store float %".42", ptr %".45", align 4
  %".47" = add nsw i64 %"i1", 1
  br label %"i1.head"
i1.exit:
  %".49" = add nsw i64 %"i0.1", 1
  br label %"i0.head.1"
i0.head.2:
  %"i0.2" = phi  i64 [0, %"i0.exit.1"], [%".72", %"k.exit.1"]
  %".53" = icmp slt i64 %"i0.2", %".51"
  br i1 %".53", label %"i0.body.2", label %"i0.exit.2"
i0.body.2:
  %".55" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float              0x0, ptr %".55", align 4
  %".57" = add i64 0, 37
  br label %"k.head.1"
i0.exit.2:
  %".74" = add i64 0, 16
  br label %"i0.head.3"
k.head.1:
  %"k.1" = phi  i64 [0, %"i0.body.2"], [%".70", %"k.body.1"]
  %".59" = icmp slt i64 %"k.1", %".57"
  br i1 %".59", label %"k.body.1", label %"k.exit.1"
k.body.1:
  %".61" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  %".62" = load float, ptr %".61", align 4
  %".63" = mul nsw i64 %"i0.2", 37
  %".64" = add nsw i64 %".63", %"k.1"
  %".65" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".64"
  %".66" = load float, ptr %".65", align 4
  %".67" = fadd contract float %".62", %".66"
  %".68" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.2"
  store float %".67", ptr %".68", align 4
  %".70" = add nsw i64 %"k.1", 1
  br label %"k.head.1"
k.exit.1:
  %".72" = add nsw i64 %"i0.2", 1
  br label %"i0.head.2"
i0.head.3:
  %"i0.3" = phi  i64 [0, %"i0.exit.2"], [%".95", %"i1.exit.1"]
  %".76" = icmp slt i64 %"i0.3", %".74"
  br i1 %".76", label %"i0.body.3", label %"i0.exit.3"
i0.body.3:
  %".78" = add i64 0, 37
  br label %"i1.head.1"
i0.exit.3:
  ret void
i1.head.1:
  %"i1.1" = phi  i64 [0, %"i0.body.3"], [%".93", %"i1.body.1"]
  %".80" = icmp slt i64 %"i1.1", %".78"
  br i1 %".80", label %"i1.body.1", label %"i1.exit.1"
i1.body.1:
  %".82" = mul nsw i64 %"i0.3", 37
  %".83" = add nsw i64 %".82", %"i1.1"
  %".84" = getelementptr inbounds float, ptr %"softmax_exp", i64 %".83"
  %".85" = load float, ptr %".84", align 4
  %".86" = getelementptr inbounds float, ptr %"softmax_sum", i64 %"i0.3"
  %".87" = load float, ptr %".86", align 4
  %".88" = fdiv float %".85", %".87"
  %".89" = mul nsw i64 %"i0.3", 37
  %".90" = add nsw i64 %".89", %"i1.1"
  %".91" = getelementptr inbounds float, ptr %"p1_softmax", i64 %".90"
  store float %".88", ptr %".91", align 4
  %".93" = add nsw i64 %"i1.1", 1
  br label %"i1.head.1"
i1.exit.1:
  %".95" = add nsw i64 %"i0.3", 1
  br label %"i0.head.3"
}

declare float @"llvm.maximum.f32"(float %".1", float %".2")

declare float @"llvm.exp.f32"(float %".1")
