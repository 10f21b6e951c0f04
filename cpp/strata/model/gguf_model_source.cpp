// The GGUF file as a ModelSource: metadata through gguf::File's typed getters (integers of any
// width that fit, floats), tensors as views into the mmap.
#include <unordered_map>

#include "strata/gguf/gguf_file.h"
#include "strata/model/model.h"
#include "strata/model/model_source.h"

namespace strata::model {
namespace {

class GgufSource : public ModelSource {
 public:
  explicit GgufSource(std::unique_ptr<gguf::File> f) : file_(std::move(f)) {
    for (const gguf::TensorInfo& t : file_->tensors()) {
      TensorRef r;
      r.name = t.name;
      r.type = t.type;
      r.ne = t.ne;
      r.data = file_->tensor_data(t);
      r.nbytes = t.nbytes;
      tensors_.emplace(t.name, std::move(r));
    }
  }
  const std::string& origin() const override { return file_->path(); }
  std::optional<uint64_t> find_uint(const std::string& key) const override {
    if (!file_->has(key)) return std::nullopt;
    return file_->get_u64(key);
  }
  std::optional<float> find_float(const std::string& key) const override {
    if (!file_->has(key)) return std::nullopt;
    return file_->get_f32(key);
  }
  std::optional<bool> find_bool(const std::string& key) const override {
    if (!file_->has(key)) return std::nullopt;
    return file_->get_bool(key);
  }
  std::optional<std::string> find_string(const std::string& key) const override {
    if (!file_->has(key)) return std::nullopt;
    return file_->get_string(key);
  }
  std::optional<std::vector<uint32_t>> find_u32_array(const std::string& key) const override {
    if (!file_->has(key)) return std::nullopt;
    return file_->get_u32_array(key);
  }
  std::optional<std::vector<float>> find_f32_array(const std::string& key) const override {
    if (!file_->has(key)) return std::nullopt;
    return file_->get_f32_array(key);
  }
  const TensorRef* find_tensor(const std::string& name) const override {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  std::optional<uint64_t> file_offset(const uint8_t* p) const override {
    const uint8_t* base = file_->data();
    if (!base || p < base || p >= base + file_->size()) return std::nullopt;
    return static_cast<uint64_t>(p - base);
  }

 private:
  std::unique_ptr<gguf::File> file_;
  std::unordered_map<std::string, TensorRef> tensors_;
};

}  // namespace

std::unique_ptr<ModelSource> open_gguf_source(const std::string& path, MmapFile::Access access) {
  return std::make_unique<GgufSource>(gguf::File::open(path, access));
}

std::unique_ptr<Model> Model::load(const std::string& path, const std::string& mtp_path) {
  std::unique_ptr<Model> m = from_source(open_gguf_source(path));
  if (!mtp_path.empty()) m->attach_mtp_file(mtp_path);
  return m;
}

void Model::attach_mtp_file(const std::string& path) { attach_mtp_source(open_gguf_source(path)); }

}  // namespace strata::model
