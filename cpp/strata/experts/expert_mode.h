#pragma once
// The expert store's modes, apart from the store itself so that the settings (config/settings.h)
// can hold them without depending on the store.
namespace strata::experts {

enum class ExpertMode { Mmap, Stream };
const char* expert_mode_name(ExpertMode m);  // "mmap", "stream"

enum class DirectIo { Auto, On, Off };   // Auto: try, fall back to buffered; On: refuse to fall back
const char* direct_io_name(DirectIo d);  // "auto", "on", "off"

// Reading the next layer's predicted experts early (ExpertStore::prefetch). Auto: per layer, while the
// prediction's precision (the share of would-be reads its layer then used) stays at least
// kPrefetchAutoPercent; On: always; Off: never.
enum class Prefetch { Auto, On, Off };
const char* prefetch_name(Prefetch p);  // "auto", "on", "off"

}  // namespace strata::experts
