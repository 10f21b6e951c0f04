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

const std::string& ExpertLayout::file(int i) const {
  static const std::string none;
  return i >= 0 && i < n_files() ? files[static_cast<std::size_t>(i)] : none;
}

void ExpertLayout::validate(const std::vector<uint64_t>& file_sizes) const {
  if (n_expert < 1)
    throw_error(ErrorKind::Format, main_file() + ": expert layout with " + std::to_string(n_expert) + " experts");
  for (int l = 0; l < n_layers(); ++l) {
    const ExpertLayer& layer = layers[static_cast<std::size_t>(l)];
    const bool known_file = layer.file >= 0 && layer.file < n_files();
    if (!known_file && (layer.file != 0 || has_file_offsets))
      throw_error(ErrorKind::Format, main_file() + ": expert layer " + std::to_string(l) + " names file " +
                                         std::to_string(layer.file) + " of " + std::to_string(n_files()));
    const std::string& path = file(layer.file);
    for (int p = 0; p < kExpertParts; ++p) {
      const ExpertTensor& t = layer.part[p];
      const std::string what = "layer " + std::to_string(l) + " " + expert_part_name(p);
      if (t.view.n_expert != n_expert || t.view.rows < 1 || t.view.cols < 1 || t.view.expert_stride == 0 ||
          t.view.expert_stride != t.view.row_stride * static_cast<uint64_t>(t.view.rows))
        throw_error(ErrorKind::Format, path + ": " + what + " has an inconsistent expert shape or stride");
      if (!has_file_offsets) continue;
      if (static_cast<std::size_t>(layer.file) >= file_sizes.size())
        throw_error(ErrorKind::Internal, path + ": no file size to check " + what + " against");
      const uint64_t file_size = file_sizes[static_cast<std::size_t>(layer.file)];
      const uint64_t bytes = t.view.expert_stride * static_cast<uint64_t>(n_expert);
      if (t.file_offset > file_size || bytes > file_size - t.file_offset)
        throw_error(ErrorKind::Format, path + ": " + what + " (" + std::to_string(bytes) + " bytes at offset " +
                                           std::to_string(t.file_offset) + ") lies outside the file of " +
                                           std::to_string(file_size) + " bytes");
    }
  }
}

namespace {

void add_layer(ExpertLayout& out, const model::ModelSource& src, int file, const model::MoeWeights& w) {
  ExpertLayer layer;
  layer.file = file;
  const model::ExpertWeights* views[kExpertParts] = {&w.gate, &w.up, &w.down};
  for (int p = 0; p < kExpertParts; ++p) {
    layer.part[p].view = *views[p];
    const std::optional<uint64_t> off = src.file_offset(views[p]->data);
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
  out.files.push_back(m.source().origin());
  out.n_expert = m.hparams().n_expert;
  out.has_file_offsets = true;
  for (const model::LayerWeights& lw : m.layers)
    if (!lw.dense.present()) add_layer(out, m.source(), 0, lw.moe);  // glm4moe's leading dense layers have no experts
  if (m.mtp) {
    // deepseek4's MTP block lives in its own file: a second file, read the same way.
    const model::ModelSource* mtp_src = m.mtp_source();
    if (mtp_src) out.files.push_back(mtp_src->origin());
    add_layer(out, mtp_src ? *mtp_src : m.source(), mtp_src ? 1 : 0, m.mtp->block.moe);
  }
  return out;
}

}  // namespace strata::experts
