#pragma once
// The MoE plan of a window (SPEC §2.4 Plan, R-2) on the GPU, the same result as
// cpp/strata/routing/plan.cpp: entries e = row·k + rank grouped by expert — resident groups first,
// then by expert id, entries in row order — with group offsets and both slot maps.
// One threadgroup (T threads, a multiple of 32). Thread t owns experts t, t + T, ...: it counts its
// experts' entries by scanning the entry list in order (no atomics, so the placement is stable and
// deterministic), two packed threadgroup scans lay the groups out (resident counts in the low 16
// bits, nonresident in the high 16: n_entries <= 65535), and a second ordered scan places entries.
#include "metal/kernels/common.h"

enum : uint { kPlanMaxExperts = 1024 };

// Threadgroup memory: count, base, gidx: E uints each; tmp: n_sg + 1 uints.
inline void plan_body(constant PlanArgs& a, device const int* ids, device const uchar* resident, device PlanHeader* hdr,
                      device int* group_expert, device int* group_offset, device int* slot_entry,
                      device int* entry_slot, TGP(uint) count, TGP(uint) base, TGP(uint) gidx, TGP(uint) tmp, KPos p) {
  const uint N = a.n_entries, E = a.n_experts, T = p.tg_size;

  // Reject ids outside [0, E): the first bad entry is reported, nothing else is written.
  uint bad = 0xFFFFFFFFu;
  for (uint e = p.tid; e < N; e += T) {
    const int x = ids[e];
    if ((x < 0 || uint(x) >= E) && e < bad) bad = e;
  }
  bad = simd_min(bad);
  if (p.lane == 0) tmp[p.sg] = bad;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (p.tid == 0) {
    uint b = 0xFFFFFFFFu;
    for (uint s = 0; s < p.n_sg; ++s) b = metal::min(b, uint(tmp[s]));
    tmp[p.n_sg] = b;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const uint first_bad = tmp[p.n_sg];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (first_bad != 0xFFFFFFFFu) {
    if (p.tid == 0) {
      hdr->n_groups = 0;
      hdr->n_resident_groups = 0;
      hdr->n_resident_slots = 0;
      hdr->bad_entry = int(first_bad);
    }
    return;  // every thread: no barrier follows
  }

  // Counts and the packed exclusive scans, chunk by chunk of T experts.
  uint run_slots = 0, run_groups = 0;
  for (uint c0 = 0; c0 < E; c0 += T) {
    const uint x = c0 + p.tid;
    uint cnt = 0;
    bool is_res = false;
    if (x < E) {
      for (uint e = 0; e < N; ++e) cnt += ids[e] == int(x) ? 1u : 0u;
      is_res = a.has_resident != 0 && resident[x] != 0;
    }
    const uint slots = is_res ? cnt : (cnt << 16);
    const uint groups = cnt == 0 ? 0u : (is_res ? 1u : (1u << 16));
    uint tot_s = 0, tot_g = 0;
    const uint ps = tg_exclusive_scan(slots, tmp, p, tot_s);
    const uint pg = tg_exclusive_scan(groups, tmp, p, tot_g);
    if (x < E) {
      count[x] = cnt;
      base[x] = run_slots + ps;
      gidx[x] = run_groups + pg;
    }
    run_slots += tot_s;
    run_groups += tot_g;
  }
  const uint res_slots = run_slots & 0xFFFFu, res_groups = run_groups & 0xFFFFu;
  const uint n_groups = res_groups + (run_groups >> 16);

  // Groups and placement: entries of expert x in entry (= row) order.
  for (uint x = p.tid; x < E; x += T) {
    const uint cnt = count[x];
    if (cnt == 0) continue;
    const bool is_res = a.has_resident != 0 && resident[x] != 0;
    const uint b = base[x], g = gidx[x];
    const uint slot0 = is_res ? (b & 0xFFFFu) : res_slots + (b >> 16);
    const uint group = is_res ? (g & 0xFFFFu) : res_groups + (g >> 16);
    group_expert[group] = int(x);
    group_offset[group] = int(slot0);
    uint cursor = slot0;
    for (uint e = 0; e < N; ++e)
      if (ids[e] == int(x)) {
        slot_entry[cursor] = int(e);
        entry_slot[e] = int(cursor);
        ++cursor;
      }
  }
  if (p.tid == 0) {
    group_offset[n_groups] = int(N);
    hdr->n_groups = n_groups;
    hdr->n_resident_groups = res_groups;
    hdr->n_resident_slots = res_slots;
    hdr->bad_entry = -1;
  }
}
