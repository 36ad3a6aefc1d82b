; tecomp golden, made with llvmlite 0.50.0 (LLVM 22.1.0)
; ModuleID = "tecomp_d79e4567f0ad"

define void @"tecomp_d79e4567f0ad"(ptr noalias %"p0_data", ptr noalias %"p1_indices", ptr noalias %"p2_indptr", ptr noalias %"p3_dense", ptr noalias %"p4_csr_spmm") nounwind
{
entry:
  br label %"start"
start:
  %".7" = add i64 0, 24
  br label %"i.head"
i.head:
  %"i" = phi  i64 [0, %"start"], [%".60", %"j.exit"]
  %".9" = icmp slt i64 %"i", %".7"
  br i1 %".9", label %"i.body", label %"i.exit"
i.body:
  %".11" = add i64 0, 16
  br label %"j.head"
i.exit:
  ret void
j.head:
  %"j" = phi  i64 [0, %"i.body"], [%".58", %"k.exit"]
  %".13" = icmp slt i64 %"j", %".11"
  br i1 %".13", label %"j.body", label %"j.exit"
j.body:
  %".15" = mul nsw i64 %"i", 16
  %".16" = add nsw i64 %".15", %"j"
  %".17" = getelementptr inbounds float, ptr %"p4_csr_spmm", i64 %".16"
  store float              0x0, ptr %".17", align 4
  %".19" = add i64 %"i", 1
  %".20" = getelementptr inbounds i32, ptr %"p2_indptr", i64 %".19"
  %".21" = load i32, ptr %".20", align 4
  %".22" = sext i32 %".21" to i64
  %".23" = getelementptr inbounds i32, ptr %"p2_indptr", i64 %"i"
  %".24" = load i32, ptr %".23", align 4
  %".25" = sext i32 %".24" to i64
  %".26" = sub i64 %".22", %".25"
  %".27" = add i64 0, %".26"
  br label %"k.head"
j.exit:
  %".60" = add nsw i64 %"i", 1
  br label %"i.head"
k.head:
  %"k" = phi  i64 [0, %"j.body"], [%".56", %"k.body"]
  %".29" = icmp slt i64 %"k", %".27"
  br i1 %".29", label %"k.body", label %"k.exit"
k.body:
  %".31" = mul nsw i64 %"i", 16
  %".32" = add nsw i64 %".31", %"j"
  %".33" = getelementptr inbounds float, ptr %"p4_csr_spmm", i64 %".32"
  %".34" = load float, ptr %".33", align 4
  %".35" = getelementptr inbounds i32, ptr %"p2_indptr", i64 %"i"
  %".36" = load i32, ptr %".35", align 4
  %".37" = sext i32 %".36" to i64
  %".38" = add i64 %".37", %"k"
  %".39" = getelementptr inbounds float, ptr %"p0_data", i64 %".38"
  %".40" = load float, ptr %".39", align 4
  %".41" = sext i32 %".36" to i64
  %".42" = add i64 %".41", %"k"
  %".43" = getelementptr inbounds i32, ptr %"p1_indices", i64 %".42"
  %".44" = load i32, ptr %".43", align 4
  %".45" = sext i32 %".44" to i64
  %".46" = mul nsw i64 %".45", 16
  %".47" = add nsw i64 %".46", %"j"
  %".48" = getelementptr inbounds float, ptr %"p3_dense", i64 %".47"
  %".49" = load float, ptr %".48", align 4
  %".50" = fmul contract float %".40", %".49"
  %".51" = fadd contract float %".34", %".50"
  %".52" = mul nsw i64 %"i", 16
  %".53" = add nsw i64 %".52", %"j"
  %".54" = getelementptr inbounds float, ptr %"p4_csr_spmm", i64 %".53"
  store float %".51", ptr %".54", align 4
  %".56" = add nsw i64 %"k", 1
  br label %"k.head"
k.exit:
  %".58" = add nsw i64 %"j", 1
  br label %"j.head"
}
