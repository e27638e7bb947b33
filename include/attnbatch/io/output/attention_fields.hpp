// The one codec of kernels::AttentionSpec: every field once, with the names it is recorded
// under. The output's root attributes (written by OutputFile, read back by
// OutputReader::provenance), the journal's identity (--resume) and the run report (--report)
// all visit the spec through for_each_attention_field, each converting the field's type (bool,
// double, kernels::Precision) its own way.
//
// Adding an attention option: its member in AttentionSpec (kernels/attention_spec.hpp), its
// line here, its option (cli/run_options.cpp), its use by the kernels.
#pragma once

#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/kernels/attention_spec.hpp"

namespace attnbatch::io {

struct AttentionField {
    const char* attribute;  // the output's root attribute (docs/formats.md's names) and --report's key
    const char* identity;   // its key in the journal's identity
    // Whether the identity names the field at its default value too. A new field must not:
    // the partial outputs of earlier versions, whose identity lacks it, stay resumable.
    bool identity_at_default;
};

// visit(const AttentionField&, Field& value, const Field& default_value) for each field, in
// the order they are recorded. Spec: kernels::AttentionSpec, const or not.
template <class Spec, class Visit>
void for_each_attention_field(Spec& spec, Visit&& visit) {
    static const kernels::AttentionSpec defaults{};
    visit(AttentionField{attribute::rope_theta, "rope theta", false}, spec.rope_theta, defaults.rope_theta);
    visit(AttentionField{attribute::causal, "causal", true}, spec.causal, defaults.causal);
    visit(AttentionField{attribute::scale, "scale", true}, spec.scale, defaults.scale);
    visit(AttentionField{attribute::precision, "precision", false}, spec.precision, defaults.precision);
}

}  // namespace attnbatch::io
