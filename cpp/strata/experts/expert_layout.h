#pragma once
// Where each routed expert lives: per MoE layer, the three 3-D tensors ffn_gate_exps, ffn_up_exps
// and ffn_down_exps ([E, rows, cols], expert index outermost), so expert e of a layer is three
// contiguous byte ranges of its file: file_offset + e·expert_stride, expert_stride bytes each.
// Layers are the main model's blocks in order, then the MTP block when the model has one. Each layer
// names its file: the model file (0), or a second file for deepseek4, whose MTP block llama.cpp
// writes into a separate file of its own.
#include <cstdint>
#include <string>
#include <vector>

#include "strata/model/model.h"
#include "strata/model/weights.h"

namespace strata::experts {

inline constexpr int kExpertParts = 3;  // gate, up, down
// "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps".
const char* expert_part_name(int part);

struct ExpertTensor {
  model::ExpertWeights view;  // the mmap view (type, shape, strides); view.data may be null in tests
  uint64_t file_offset = 0;   // absolute offset of expert 0's bytes in the file
};

struct ExpertLayer {
  ExpertTensor part[kExpertParts];
  int file = 0;                   // index into ExpertLayout::files: the file the file_offsets are in
  uint64_t expert_bytes() const;  // the three slices of one expert
};

struct ExpertLayout {
  // The files the layers' experts are in: [0] the model file, then any other (deepseek4's MTP file).
  // Empty, or [0] == "", when the model has no file (mmap mode only).
  std::vector<std::string> files;
  int64_t n_expert = 0;  // E, the same for every layer
  std::vector<ExpertLayer> layers;
  bool has_file_offsets = false;  // every part's file_offset is known

  int n_layers() const { return static_cast<int>(layers.size()); }
  int n_files() const { return static_cast<int>(files.size()); }
  const std::string& file(int i) const;  // files[i], "" when out of range
  const std::string& main_file() const { return file(0); }
  uint64_t total_bytes() const;  // every expert of every layer
  // Checks shapes, strides, that each layer's file index names a file and (with file offsets) that
  // every range lies inside its file, file_sizes[i] bytes for files[i]; a Format error names the
  // file, the layer and the tensor.
  void validate(const std::vector<uint64_t>& file_sizes) const;
};

// The layout of a loaded model: main layers 0..L-1, then the MTP block as layer L when present
// (deepseek4's from its own MTP file: files[1]). File offsets come from the layer's source
// (ModelSource::file_offset); an in-memory model gets has_file_offsets = false.
ExpertLayout expert_layout(const model::Model& m);

}  // namespace strata::experts
