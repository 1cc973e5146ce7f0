// The xgrammar objects behind CompiledConstraint (private to constraint/).
#pragma once

#include <xgrammar/xgrammar.h>

#include "engine/constraint/constraint_compiler.h"

namespace folio {

struct CompiledConstraint::Impl {
  xgrammar::CompiledGrammar grammar;
  std::int64_t vocab_size;
};

}  // namespace folio
