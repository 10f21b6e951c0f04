#include "strata/model/model.h"

#include "strata/util/error.h"

namespace strata::model {

std::unique_ptr<Model> Model::from_source(std::unique_ptr<ModelSource> src) {
  if (!src) throw_error(ErrorKind::Value, "Model::from_source: null source");
  std::unique_ptr<Model> m(new Model());
  m->hp_ = read_hparams(*src);
  m->src_ = std::move(src);
  if (m->hp_.arch == Arch::Strata)
    bind_strata(*m);
  else
    bind_qwen3moe(*m);
  return m;
}

}  // namespace strata::model
