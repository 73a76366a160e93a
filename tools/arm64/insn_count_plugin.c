/*
 * Dynamic instruction counts per guest instruction address, in phases, for qemu-user.
 *
 *     gcc -shared -fPIC -O2 -fvisibility=hidden -o insn_count.so insn_count_plugin.c
 *     QEMU_PLUGIN=insn_count.so,out=/tmp/counts qemu-aarch64 ...
 *
 * Every translated instruction gets an inline counter (one add per execution, no call).
 * The guest marks phases with a system call nothing else makes: lseek(fd, MARK | id, 0),
 * on /dev/null (which ignores the offset and returns 0: the mark raises nothing in the
 * guest, so it adds few instructions to the phases). A mark ends the current phase: the
 * plugin writes, for every instruction executed since the previous mark, "vaddr count
 * opcode mnemonic operands", under a "phase ID" line, to OUT.PID. Phase 0 is "not
 * measured": nothing is written for it.
 *
 * Declarations of the qemu plugin API used here (QEMU_PLUGIN_VERSION 1, qemu 7.x; the
 * installed qemu ships no header). Only plain C: the tool builds this at run time.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*syscall_cb)(qemu_plugin_id_t, unsigned int, int64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                           uint64_t, uint64_t, uint64_t, uint64_t);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb cb);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, syscall_cb cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb cb, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
char *qemu_plugin_insn_disas(const struct qemu_plugin_insn *insn);

EXPORT int qemu_plugin_version = 1;

enum { AARCH64_LSEEK = 62 };
static const uint64_t MARK = 0x4544474500000000ull; /* "EDGE" in the high word, phase id below */

/* One record per guest instruction address; records never move (counters are patched into
 * translated code by address), the hash table holds pointers to them. */
struct insn {
    uint64_t vaddr;
    uint64_t count;
    uint64_t reported;
    uint32_t opcode;
    char *disas;
};

enum { CHUNK = 4096 };
static struct insn **table;
static size_t table_size, table_used;
static struct insn *chunk;
static size_t chunk_used = CHUNK;
static struct insn **all;
static size_t all_used, all_size;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char out_path[4096];
static uint32_t phase;

static size_t slot_of(uint64_t vaddr, size_t size) {
    uint64_t h = vaddr * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (size - 1);
}

static void grow(void) {
    size_t size = table_size ? table_size * 2 : (1u << 16);
    struct insn **grown = calloc(size, sizeof *grown);
    if (!grown) abort();
    for (size_t i = 0; i < table_size; i++) {
        if (!table[i]) continue;
        size_t s = slot_of(table[i]->vaddr, size);
        while (grown[s]) s = (s + 1) & (size - 1);
        grown[s] = table[i];
    }
    free(table);
    table = grown;
    table_size = size;
}

static struct insn *record_of(uint64_t vaddr, const struct qemu_plugin_insn *handle) {
    if (4 * (table_used + 1) > 3 * table_size) grow();
    size_t s = slot_of(vaddr, table_size);
    while (table[s]) {
        if (table[s]->vaddr == vaddr) return table[s];
        s = (s + 1) & (table_size - 1);
    }
    if (chunk_used == CHUNK) {
        chunk = calloc(CHUNK, sizeof *chunk);
        if (!chunk) abort();
        chunk_used = 0;
    }
    struct insn *rec = &chunk[chunk_used++];
    rec->vaddr = vaddr;
    uint32_t word = 0;
    size_t n = qemu_plugin_insn_size(handle);
    memcpy(&word, qemu_plugin_insn_data(handle), n < sizeof word ? n : sizeof word);
    rec->opcode = word;
    rec->disas = qemu_plugin_insn_disas(handle);
    table[s] = rec;
    table_used++;
    if (all_used == all_size) {
        all_size = all_size ? all_size * 2 : (1u << 16);
        all = realloc(all, all_size * sizeof *all);
        if (!all) abort();
    }
    all[all_used++] = rec;
    return rec;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *handle = qemu_plugin_tb_get_insn(tb, i);
        struct insn *rec = record_of(qemu_plugin_insn_vaddr(handle), handle);
        qemu_plugin_register_vcpu_insn_exec_inline(handle, QEMU_PLUGIN_INLINE_ADD_U64, &rec->count, 1);
    }
    pthread_mutex_unlock(&lock);
}

/* Writes the phase that just ended (unless it is 0) and starts counting the next from here. */
static void end_phase(uint32_t next) {
    FILE *out = NULL;
    if (phase != 0) {
        out = fopen(out_path, "a");
        if (out) fprintf(out, "phase %" PRIu32 "\n", phase);
    }
    for (size_t i = 0; i < all_used; i++) {
        struct insn *rec = all[i];
        uint64_t delta = rec->count - rec->reported;
        if (delta && out) {
            fprintf(out, "%" PRIx64 " %" PRIu64 " %08" PRIx32 " %s\n", rec->vaddr, delta, rec->opcode,
                    rec->disas ? rec->disas : "?");
        }
        rec->reported = rec->count;
    }
    if (out) fclose(out);
    phase = next;
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                       uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8) {
    (void)id, (void)vcpu, (void)a1, (void)a3, (void)a4, (void)a5, (void)a6, (void)a7, (void)a8;
    if (num != AARCH64_LSEEK || (a2 & 0xFFFFFFFF00000000ull) != MARK) return;
    pthread_mutex_lock(&lock);
    end_phase((uint32_t)a2);
    pthread_mutex_unlock(&lock);
}

static void on_guest_exit(qemu_plugin_id_t id, void *userdata) {
    (void)id, (void)userdata;
    pthread_mutex_lock(&lock);
    end_phase(0);
    pthread_mutex_unlock(&lock);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info;
    const char *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0) out = argv[i] + 4;
    }
    if (!out) {
        fprintf(stderr, "insn_count plugin: give out=PATH\n");
        return 1;
    }
    snprintf(out_path, sizeof out_path, "%s.%ld", out, (long)getpid());
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_atexit_cb(id, on_guest_exit, NULL);
    return 0;
}
