#pragma once
// Where each routed expert lives: per MoE layer, the three 3-D tensors ffn_gate_exps, ffn_up_exps
// and ffn_down_exps ([E, rows, cols], expert index outermost), so expert e of a layer is three
// contiguous byte ranges of the file: file_offset + e·expert_stride, expert_stride bytes each.
// Layers are the main model's blocks in order, then the MTP block when the model has one.
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
  uint64_t expert_bytes() const;  // the three slices of one expert
};

struct ExpertLayout {
  std::string path;      // the file ("" when the model has no file: mmap mode only)
  int64_t n_expert = 0;  // E, the same for every layer
  std::vector<ExpertLayer> layers;
  bool has_file_offsets = false;  // every part's file_offset is known

  int n_layers() const { return static_cast<int>(layers.size()); }
  uint64_t total_bytes() const;  // every expert of every layer
  // Checks shapes, strides and (with file offsets) that every range lies inside a file of
  // file_size bytes; a Format error names the layer and tensor.
  void validate(uint64_t file_size) const;
};

// The layout of a loaded model: main layers 0..L-1, then the MTP block as layer L when present.
// File offsets come from the model's source (ModelSource::file_offset); an in-memory model gets
// has_file_offsets = false.
ExpertLayout expert_layout(const model::Model& m);

}  // namespace strata::experts
