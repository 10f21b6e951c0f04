#include "strata/experts/expert_layout.h"

#include <string>

#include "strata/util/error.h"

namespace strata::experts {

const char* expert_part_name(int part) {
  switch (part) {
    case 0: return "ffn_gate_exps";
    case 1: return "ffn_up_exps";
    case 2: return "ffn_down_exps";
    default: return "?";
  }
}

uint64_t ExpertLayer::expert_bytes() const {
  uint64_t b = 0;
  for (const ExpertTensor& t : part) b += t.view.expert_stride;
  return b;
}

uint64_t ExpertLayout::total_bytes() const {
  uint64_t b = 0;
  for (const ExpertLayer& l : layers) b += l.expert_bytes() * static_cast<uint64_t>(n_expert);
  return b;
}

void ExpertLayout::validate(uint64_t file_size) const {
  if (n_expert < 1)
    throw_error(ErrorKind::Format, path + ": expert layout with " + std::to_string(n_expert) + " experts");
  for (int l = 0; l < n_layers(); ++l) {
    for (int p = 0; p < kExpertParts; ++p) {
      const ExpertTensor& t = layers[static_cast<std::size_t>(l)].part[p];
      const std::string what = "layer " + std::to_string(l) + " " + expert_part_name(p);
      if (t.view.n_expert != n_expert || t.view.rows < 1 || t.view.cols < 1 || t.view.expert_stride == 0 ||
          t.view.expert_stride != t.view.row_stride * static_cast<uint64_t>(t.view.rows))
        throw_error(ErrorKind::Format, path + ": " + what + " has an inconsistent expert shape or stride");
      if (!has_file_offsets) continue;
      const uint64_t bytes = t.view.expert_stride * static_cast<uint64_t>(n_expert);
      if (t.file_offset > file_size || bytes > file_size - t.file_offset)
        throw_error(ErrorKind::Format, path + ": " + what + " (" + std::to_string(bytes) + " bytes at offset " +
                                           std::to_string(t.file_offset) + ") lies outside the file of " +
                                           std::to_string(file_size) + " bytes");
    }
  }
}

namespace {

void add_layer(ExpertLayout& out, const model::Model& m, const model::MoeWeights& w) {
  ExpertLayer layer;
  const model::ExpertWeights* views[kExpertParts] = {&w.gate, &w.up, &w.down};
  for (int p = 0; p < kExpertParts; ++p) {
    layer.part[p].view = *views[p];
    const std::optional<uint64_t> off = m.source().file_offset(views[p]->data);
    if (off)
      layer.part[p].file_offset = *off;
    else
      out.has_file_offsets = false;
  }
  out.layers.push_back(layer);
}

}  // namespace

ExpertLayout expert_layout(const model::Model& m) {
  ExpertLayout out;
  out.path = m.source().origin();
  out.n_expert = m.hparams().n_expert;
  out.has_file_offsets = true;
  for (const model::LayerWeights& lw : m.layers)
    if (!lw.dense.present()) add_layer(out, m, lw.moe);  // glm4moe's leading dense layers have no experts
  // deepseek4's MTP layer lives in its own file: its experts are read from that file's mapping.
  if (m.mtp && !m.mtp_source()) add_layer(out, m, m.mtp->block.moe);
  return out;
}

}  // namespace strata::experts
