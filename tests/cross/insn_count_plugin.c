/* A qemu-user TCG plugin that counts the guest instructions executed and prints the total at exit
 * ("insns N" on stderr with -d plugin). Used by count-neon-insns.sh for instruction counts of the
 * NEON kernels (qemu's timings say nothing about an ARM core's; counts at least compare paths).
 * The few plugin API declarations are spelled out (Debian ships no qemu-plugin.h): API version 1,
 * QEMU 5.0 .. 8.x, whose qemu_plugin_register_vcpu_tb_exec_inline later versions removed. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, struct qemu_plugin_tb*));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb*);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb*, int op, void* ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, void*), void*);
void qemu_plugin_outs(const char*);
static uint64_t count;
static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, 0, &count, qemu_plugin_tb_n_insns(tb));
}
static void at_exit(qemu_plugin_id_t id, void* p) {
  (void)id; (void)p;
  char buf[64];
  snprintf(buf, sizeof buf, "insns %" PRIu64 "\n", count);
  qemu_plugin_outs(buf);
}
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc, char** argv) {
  (void)info; (void)argc; (void)argv;
  qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
  qemu_plugin_register_atexit_cb(id, at_exit, NULL);
  return 0;
}
