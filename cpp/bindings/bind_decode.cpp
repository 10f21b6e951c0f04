// Bindings of the decode loop's decision logic (submodule strata._strata.decode): MOCE routing, the
// MoE plan, sample_dist / sampling / verify_window with a serialisable rng, draft retention and the
// draft-cell bookkeeping (the settings: bind_settings.cpp). Used by Python tests.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings/bindings.h"
#include "bindings/spec_round.h"
#include "strata/config/settings.h"
#include "strata/draft/draft_cells.h"
#include "strata/draft/retention.h"
#include "strata/routing/plan.h"
#include "strata/routing/router.h"
#include "strata/routing/window_routing.h"
#include "strata/sampling/policy.h"
#include "strata/sampling/rng.h"
#include "strata/sampling/sample_dist.h"
#include "strata/sampling/verify.h"
#include "strata/util/error.h"

namespace py = pybind11;

namespace strata::bindings {
namespace {

using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using U8 = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

void require(bool ok, const std::string& msg) {
  if (!ok) throw_error(ErrorKind::Value, msg);
}

const uint8_t* residency(const std::optional<U8>& resident, py::ssize_t n_experts) {
  if (!resident) return nullptr;
  require(resident->ndim() == 1 && resident->shape(0) == n_experts,
          "resident must be a 1-D array of n_experts = " + std::to_string(n_experts) + " bytes");
  return resident->data();
}

}  // namespace

void bind_decode(py::module_& parent) {
  py::module_ m =
      parent.def_submodule("decode", "Decode-loop decision logic: routing, plan, sampling, settings, drafting");

  // ---- routing
  py::class_<routing::MoceParams>(m, "MoceParams")
      .def(py::init([](float resident_bonus, float rank1_scale, int protect, bool draft, float window_bonus) {
             return routing::MoceParams{resident_bonus, rank1_scale, protect, draft, window_bonus};
           }),
           py::arg("resident_bonus") = 1.0f, py::arg("rank1_scale") = 1.0f, py::arg("protect") = 0,
           py::arg("draft") = false, py::arg("window_bonus") = 1.0f)
      .def_readwrite("resident_bonus", &routing::MoceParams::resident_bonus)
      .def_readwrite("rank1_scale", &routing::MoceParams::rank1_scale)
      .def_readwrite("protect", &routing::MoceParams::protect)
      .def_readwrite("draft", &routing::MoceParams::draft)
      .def_readwrite("window_bonus", &routing::MoceParams::window_bonus,
                     "> 1: streaming-aware verification windows (draft rows prefer the experts the window requested)");
  m.attr("MAX_TOP_K") = routing::kMaxTopK;

  m.def(
      "route_row",
      [](const F32& probs, int k, const std::optional<U8>& resident, const routing::MoceParams& p, bool draft_row) {
        require(probs.ndim() == 1, "probs must be 1-D");
        const auto E = probs.shape(0);
        const uint8_t* res = residency(resident, E);
        I32 ids(k);
        F32 w(k);
        {
          py::gil_scoped_release nogil;
          routing::route_row(probs.data(), static_cast<int>(E), k, res, p, draft_row, ids.mutable_data(),
                             w.mutable_data());
        }
        return py::make_tuple(ids, w);
      },
      py::arg("probs"), py::arg("k"), py::arg("resident") = py::none(), py::arg("params") = routing::MoceParams{},
      py::arg("draft_row") = false, "MOCE top-k of one row: (ids int32[k], weights float32[k])");

  m.def(
      "route_window",
      [](const F32& probs, int k, const std::optional<U8>& resident, const routing::MoceParams& p, bool verification) {
        require(probs.ndim() == 2, "probs must be 2-D (rows, n_experts)");
        const auto n = probs.shape(0), E = probs.shape(1);
        const uint8_t* res = residency(resident, E);
        I32 ids({n, static_cast<py::ssize_t>(k)});
        F32 w({n, static_cast<py::ssize_t>(k)});
        std::vector<uint8_t> map(static_cast<std::size_t>(E));
        routing::route_window_rows(probs.data(), static_cast<int>(n), static_cast<int>(E), k, res, p,
                                   verification ? 1 : -1, map.data(), ids.mutable_data(), w.mutable_data());
        return py::make_tuple(ids, w);
      },
      py::arg("probs"), py::arg("k"), py::arg("resident") = py::none(), py::arg("params") = routing::MoceParams{},
      py::arg("verification") = false,
      "route_row over every row; with verification=True rows after the first are draft rows (and, with "
      "params.window_bonus > 1, routed one after another against the residency plus the window's requests)");

  m.def(
      "build_plan",
      [](const I32& ids, int n_experts, const std::optional<U8>& resident) {
        require(ids.ndim() == 2, "ids must be 2-D (rows, k)");
        const uint8_t* res = residency(resident, n_experts);
        routing::Plan plan;
        routing::build_plan(ids.data(), static_cast<int>(ids.shape(0)), static_cast<int>(ids.shape(1)), n_experts, res,
                            plan);
        py::dict d;
        d["group_expert"] = I32(static_cast<py::ssize_t>(plan.group_expert.size()), plan.group_expert.data());
        d["group_offset"] = I32(static_cast<py::ssize_t>(plan.group_offset.size()), plan.group_offset.data());
        d["slot_entry"] = I32(static_cast<py::ssize_t>(plan.slot_entry.size()), plan.slot_entry.data());
        d["entry_slot"] = I32(static_cast<py::ssize_t>(plan.entry_slot.size()), plan.entry_slot.data());
        d["n_resident_groups"] = plan.n_resident_groups;
        d["n_resident_slots"] = plan.n_resident_slots;
        return d;
      },
      py::arg("ids"), py::arg("n_experts"), py::arg("resident") = py::none(),
      "MoE plan of a window: groups by expert (resident first), entries in row order");

  // ---- sampling
  py::class_<sampling::SamplingPolicy>(m, "SamplingPolicy")
      .def(py::init([](float temperature, int top_k, float top_p, float min_p, float repetition_penalty,
                       float presence_penalty, int penalty_last_n) {
             sampling::SamplingPolicy p{temperature,      top_k,         top_p, min_p, repetition_penalty,
                                        presence_penalty, penalty_last_n};
             sampling::validate(p);
             return p;
           }),
           py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f,
           py::arg("repetition_penalty") = 1.0f, py::arg("presence_penalty") = 0.0f, py::arg("penalty_last_n") = -1)
      .def_readwrite("temperature", &sampling::SamplingPolicy::temperature)
      .def_readwrite("top_k", &sampling::SamplingPolicy::top_k)
      .def_readwrite("top_p", &sampling::SamplingPolicy::top_p)
      .def_readwrite("min_p", &sampling::SamplingPolicy::min_p)
      .def_readwrite("repetition_penalty", &sampling::SamplingPolicy::repetition_penalty)
      .def_readwrite("presence_penalty", &sampling::SamplingPolicy::presence_penalty)
      .def_readwrite("penalty_last_n", &sampling::SamplingPolicy::penalty_last_n)
      .def("validate", [](const sampling::SamplingPolicy& p) { sampling::validate(p); });

  py::class_<sampling::Rng>(m, "Rng")
      .def(py::init<uint64_t>(), py::arg("seed") = 0)
      .def("reseed", &sampling::Rng::reseed, py::arg("seed"))
      .def("state",
           [](const sampling::Rng& r) {
             const auto s = r.state();
             return py::make_tuple(s[0], s[1], s[2], s[3]);
           })
      .def(
          "set_state", [](sampling::Rng& r, const std::array<uint64_t, 4>& s) { r.set_state(s); }, py::arg("state"))
      .def("next", &sampling::Rng::next)
      .def("uniform", &sampling::Rng::uniform);

  m.def(
      "sample_dist",
      [](const F32& logits, const sampling::SamplingPolicy& p, const std::vector<int32_t>& history,
         const std::vector<int32_t>& inputs) {
        require(logits.ndim() == 1, "logits must be 1-D");
        sampling::validate(p);
        sampling::SampleWorkspace ws;
        F32 out(logits.shape(0));
        sampling::sample_dist(logits.data(), static_cast<int>(logits.shape(0)), p, history, inputs, out.mutable_data(),
                              ws);
        return out;
      },
      py::arg("logits"), py::arg("policy"), py::arg("history") = std::vector<int32_t>{},
      py::arg("inputs") = std::vector<int32_t>{},
      "Distribution after top-k, penalties (history ++ inputs), temperature, min-p, top-p");

  m.def(
      "sample_logits",
      [](const F32& logits, const sampling::SamplingPolicy& p, const std::vector<int32_t>& history,
         const std::vector<int32_t>& inputs, sampling::Rng& rng) {
        require(logits.ndim() == 1, "logits must be 1-D");
        sampling::validate(p);
        sampling::SampleWorkspace ws;
        return sampling::sample_logits(logits.data(), static_cast<int>(logits.shape(0)), p, history, inputs, rng, ws);
      },
      py::arg("logits"), py::arg("policy"), py::arg("history"), py::arg("inputs"), py::arg("rng"));

  m.def(
      "verify_window",
      [](const F32& logits, const std::vector<int32_t>& drafts, const sampling::SamplingPolicy& p,
         const std::vector<int32_t>& history, sampling::Rng& rng, const std::string& mode) {
        require(logits.ndim() == 2 && logits.shape(0) == static_cast<py::ssize_t>(drafts.size()) + 1,
                "logits must be 2-D with len(drafts) + 1 rows");
        sampling::validate(p);
        sampling::SampleWorkspace ws;
        const auto r = sampling::verify_window(logits.data(), static_cast<int>(logits.shape(1)), drafts, p,
                                               spec_mode(mode), history, rng, ws);
        return py::make_tuple(r.accepted, r.next_token);
      },
      py::arg("logits"), py::arg("drafts"), py::arg("policy"), py::arg("history"), py::arg("rng"),
      py::arg("mode") = "exact", "(accepted drafts, next token); history ends with the window's first input");

  // ---- drafting
  m.def(
      "retain_chained",
      [](const std::map<std::string, std::string>& env, float caller_min_p, const std::vector<float>& probs) {
        const auto s = config::load_settings_strict(env);
        return draft::retain_chained(s.retention, caller_min_p, probs);
      },
      py::arg("env"), py::arg("caller_min_p"), py::arg("probs"),
      "Kept prefix length of a drafted chain under the retention settings in env");

  py::class_<draft::DraftCells>(m, "DraftCells")
      .def(py::init<int, int>(), py::arg("sink") = 64, py::arg("window") = 256)
      .def("wrote", &draft::DraftCells::wrote, py::arg("c0"), py::arg("n"))
      .def("reset", &draft::DraftCells::reset)
      .def("load", &draft::DraftCells::load)
      .def_property_readonly("sink_end", &draft::DraftCells::sink_end)
      .def_property_readonly("run",
                             [](const draft::DraftCells& d) { return py::make_tuple(d.run_begin(), d.run_end()); })
      .def("valid", &draft::DraftCells::valid, py::arg("cell"))
      .def(
          "draft_row_cells",
          [](const draft::DraftCells& d, int32_t pos) {
            std::vector<int32_t> out;
            d.draft_row_cells(pos, out);
            return out;
          },
          py::arg("pos"))
      .def(
          "check_reads",
          [](const draft::DraftCells& d, const std::vector<int32_t>& cells, int32_t pos, int chain_step) {
            d.check_reads(cells, pos, chain_step);
          },
          py::arg("cells"), py::arg("pos"), py::arg("chain_step") = 0);
}

}  // namespace strata::bindings
