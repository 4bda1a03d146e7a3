// The bare-loop baseline for `scen bench --hw` and `scen run --hw` (docs/bench.md, "Baseline"):
// the same sweep as scen bench (ops, sizes, dtype, reduction, warmup, iters, values and size
// rules) as a plain loop of oneCCL C API calls -- the API, library (libccl.so.2, loaded as
// crates/oneccl-sys loads it) and buffers scen uses -- with no code of scen's: a ceiling for
// scen's figures. The prototypes are declared here as crates/oneccl-sys declares them
// (oneapi/ccl.h includes C++ headers, so a C program cannot include it). One process per rank; rank 0 gets the unique id
// and writes it to a file the other ranks poll (scripts/bench-baseline.sh starts them). Rank 0
// writes a `scen bench --format json` report (path "baseline"). Times: mean microseconds per
// call over the timed iterations, averaged over ranks (nccl-tests' default), and the median
// over blocks of iters/8 calls.
//
// usage: oneccl_bench --rank R --ranks N --kvs FILE [--json OUT] [--op all_reduce,...]
//                     [--sizes 4K:64M] [--dtype f32] [--redop sum] [--warmup 10] [--iters 100]
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// oneCCL's C API (oneapi/ccl.h, oneapi/ccl/v2/types.h), as crates/oneccl-sys declares it and
// loaded as it loads it: dlopen(RTLD_LAZY | RTLD_LOCAL) of $ONECCL_ROOT/lib/libccl.so.2. (A
// build linked against libccl.so.2 measured 24-31 ms per 16 MiB all_reduce on 2 ranks in one
// series of 7 where scen's loop took 10-20 ms; not isolated further on the shared machine.)
typedef int onecclResult_t;
typedef void *onecclComm_t;
typedef struct { char data[4096]; } onecclUniqueId;
static onecclResult_t (*onecclGetUniqueId)(onecclUniqueId *id);
static onecclResult_t (*onecclCommInitRank)(onecclComm_t *comm, size_t nranks, onecclUniqueId id,
                                            int rank);
static const char *(*onecclGetErrorString)(onecclResult_t r);
static onecclResult_t (*onecclAllReduce)(void *s, void *r, size_t n, int dt, int op,
                                         onecclComm_t c, void *st);
static onecclResult_t (*onecclAllGather)(const void *s, void *r, size_t n, int dt, onecclComm_t c,
                                         void *st);
static onecclResult_t (*onecclReduceScatter)(const void *s, void *r, size_t n, int dt, int op,
                                             onecclComm_t c, void *st);
static onecclResult_t (*onecclAllToAllV)(const void *s, const size_t *sc, void *r,
                                         const size_t *rc, int dt, onecclComm_t c, void *st);
static onecclResult_t (*onecclBroadcast)(const void *s, void *r, size_t n, int dt, int root,
                                         onecclComm_t c, void *st);
static onecclResult_t (*onecclReduce)(const void *s, void *r, size_t n, int dt, int op, int root,
                                      onecclComm_t c, void *st);

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "oneccl_bench: %s not in libccl.so.2\n", name);
    exit(2);
  }
  return p;
}

static void load_oneccl(void) {
  const char *root = getenv("ONECCL_ROOT");
  char path[4096];
  snprintf(path, sizeof path, "%s/lib/libccl.so.2", root ? root : ".");
  void *lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  if (!lib) lib = dlopen("libccl.so.2", RTLD_LAZY | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "oneccl_bench: cannot load libccl.so.2: %s\n", dlerror());
    exit(2);
  }
  *(void **)&onecclGetUniqueId = sym(lib, "onecclGetUniqueId");
  *(void **)&onecclCommInitRank = sym(lib, "onecclCommInitRank");
  *(void **)&onecclGetErrorString = sym(lib, "onecclGetErrorString");
  *(void **)&onecclAllReduce = sym(lib, "onecclAllReduce");
  *(void **)&onecclAllGather = sym(lib, "onecclAllGather");
  *(void **)&onecclReduceScatter = sym(lib, "onecclReduceScatter");
  *(void **)&onecclAllToAllV = sym(lib, "onecclAllToAllV");
  *(void **)&onecclBroadcast = sym(lib, "onecclBroadcast");
  *(void **)&onecclReduce = sym(lib, "onecclReduce");
}
enum { I8 = 0, U8 = 1, I32 = 2, I64 = 4, F16 = 6, F32 = 7, F64 = 8, BF16 = 9 };
enum { SUM = 0, PROD = 1, MAX = 2, MIN = 3 };

enum op { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, REDUCE };
static const char *op_names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                 "all_to_all", "broadcast", "reduce"};

static void die(const char *what, const char *arg) {
  fprintf(stderr, "oneccl_bench: %s%s\n", what, arg ? arg : "");
  exit(2);
}

static void check(onecclResult_t rc, const char *call) {
  if (rc != 0) {
    fprintf(stderr, "oneccl_bench: %s failed: %d (%s)\n", call, rc, onecclGetErrorString(rc));
    exit(2);
  }
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// `4096`, `4K`, `64M`, `1G` (binary suffixes, as nccl-tests and scen).
static size_t parse_size(const char *s0) {
  char s[64];
  snprintf(s, sizeof s, "%s", s0);
  size_t n = strlen(s), mult = 1;
  if (n && (s[n - 1] == 'B' || s[n - 1] == 'b')) s[--n] = 0;
  if (n && s[n - 1] == 'i') s[--n] = 0;
  if (n && isalpha((unsigned char)s[n - 1])) {
    switch (toupper((unsigned char)s[n - 1])) {
      case 'K': mult = 1ull << 10; break;
      case 'M': mult = 1ull << 20; break;
      case 'G': mult = 1ull << 30; break;
      default: die("bad size ", s0);
    }
    s[--n] = 0;
  }
  char *end = NULL;
  double v = strtod(s, &end);
  if (!n || *end || v < 0) die("bad size ", s0);
  return (size_t)llround(v * (double)mult);
}

// `4K:64M` doubles, `1K:1M:4` multiplies by 4, `1M,16M` lists.
static size_t parse_sweep(const char *spec, size_t *out, size_t cap) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec);
  size_t k = 0;
  for (char *save = NULL, *part = strtok_r(buf, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
    char *f[3] = {part, NULL, NULL};
    int nf = 1;
    for (char *c = part; *c && nf < 3; c++)
      if (*c == ':') *c = 0, f[nf++] = c + 1;
    if (nf == 1) {
      if (k < cap) out[k++] = parse_size(f[0]);
      continue;
    }
    size_t lo = parse_size(f[0]), hi = parse_size(f[1]), m = nf == 3 ? (size_t)atoll(f[2]) : 2;
    if (lo < 1) lo = 1;
    if (m < 2 || hi < lo) die("bad size range ", spec);
    for (size_t v = lo; v <= hi && k < cap; v *= m) out[k++] = v;
  }
  if (!k) die("no sizes", NULL);
  return k;
}

static int parse_op(const char *s) {
  for (int i = 0; i < 6; i++)
    if (!strcmp(s, op_names[i])) return i;
  if (!strcmp(s, "allreduce")) return ALL_REDUCE;
  if (!strcmp(s, "allgather")) return ALL_GATHER;
  if (!strcmp(s, "reducescatter")) return REDUCE_SCATTER;
  if (!strcmp(s, "alltoall")) return ALL_TO_ALL;
  die("unknown op ", s);
  return 0;
}

struct dtype {
  const char *name;
  size_t size;
  int ccl;
};
static struct dtype parse_dtype(const char *s) {
  static const struct dtype all[] = {{"f32", 4, F32}, {"f64", 8, F64}, {"bf16", 2, BF16},
                                     {"f16", 2, F16}, {"i32", 4, I32}, {"i64", 8, I64},
                                     {"i8", 1, I8},   {"u8", 1, U8}};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (!strcmp(s, all[i].name)) return all[i];
  die("unsupported dtype ", s);
  return all[0];
}

// The values are small non-negative integers: exact in every dtype.
static uint16_t to_half(double v) {
  if (v == 0) return 0;
  int e = (int)floor(log2(v));
  uint32_t mant = (uint32_t)lround((v / ldexp(1.0, e) - 1.0) * 1024.0);
  return (uint16_t)(((e + 15) << 10) | mant);
}
static void encode(const struct dtype *d, double v, uint8_t *p) {
  float f = (float)v;
  uint32_t u;
  uint16_t h;
  int32_t i32 = (int32_t)v;
  int64_t i64 = (int64_t)v;
  switch (d->ccl) {
    case F32: memcpy(p, &f, 4); break;
    case F64: memcpy(p, &v, 8); break;
    case BF16: memcpy(&u, &f, 4); h = (uint16_t)(u >> 16); memcpy(p, &h, 2); break;
    case F16: h = to_half(v); memcpy(p, &h, 2); break;
    case I32: memcpy(p, &i32, 4); break;
    case I64: memcpy(p, &i64, 8); break;
    default: *p = (uint8_t)(int)v; break;
  }
}

// Element i of rank r's send buffer (scen's crates/hw/src/bench/values.rs).
static double input(int r, size_t i, int red) {
  if (red == PROD) return r == 0 ? (double)(i % 4 + 1) : 1.0;
  return (double)((r + i) % 4);
}
static double reduced(int n, size_t i, int red) {
  double acc = input(0, i, red);
  for (int r = 1; r < n; r++) {
    double v = input(r, i, red);
    acc = red == SUM ? acc + v : red == PROD ? acc * v : red == MAX ? fmax(acc, v) : fmin(acc, v);
  }
  return acc;
}
// Expected element j of rank me's receive buffer; 0 where the op leaves it undefined.
static int expected(int o, int n, int me, size_t sc, size_t j, int red, double *v) {
  switch (o) {
    case ALL_REDUCE: *v = reduced(n, j, red); return 1;
    case REDUCE: *v = reduced(n, j, red); return me == 0;
    case BROADCAST: *v = input(0, j, red); return 1;
    case ALL_GATHER: *v = input((int)(j / sc), j % sc, red); return 1;
    case REDUCE_SCATTER: *v = reduced(n, (size_t)me * (sc / n) + j, red); return 1;
    default: { size_t c = sc / n; *v = input((int)(j / c), (size_t)me * c + j % c, red); return 1; }
  }
}

// 2 MiB-aligned, in transparent huge pages and touched, as scen's buffers end up (its allocator,
// mimalloc, gives large blocks huge pages): with 4 KiB pages this loop was 12-15% slower than
// `scen bench` at 4 ranks x 16 MiB (30-32 ms against 26-28 ms, 3 pairs), with huge pages on
// par (26.5-28.6 ms against 25.7-26.7 ms). malloc's large blocks also sit 16 bytes past a page,
// which costs oneCCL's reduction ~10%.
static uint8_t *buffer(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, (size_t)2 << 20, bytes ? bytes : 1) != 0) die("out of memory", NULL);
  madvise(p, bytes, MADV_HUGEPAGE);
  memset(p, 0, bytes);
  return p;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// Rank 0: the unique id, written to `path` (tmp + rename). Others: poll for it.
static onecclUniqueId rendezvous(int rank, const char *path) {
  static onecclUniqueId id;
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (rank == 0) {
    check(onecclGetUniqueId(&id), "onecclGetUniqueId");
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(&id, 1, sizeof id, f) != sizeof id || fclose(f) != 0) die("cannot write ", tmp);
    if (rename(tmp, path) != 0) die("cannot rename to ", path);
    return id;
  }
  for (double until = now_s() + 120;;) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(&id, 1, sizeof id, f);
      fclose(f);
      if (n == sizeof id) return id;
    }
    if (now_s() > until) die("no unique id after 120 s in ", path);
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
}

struct args {
  int rank, ranks;
  const char *kvs, *json, *ops, *sizes, *dtype, *redop;
  size_t warmup, iters;
};

static struct args parse_args(int argc, char **argv) {
  struct args a = {-1, 0, NULL, NULL, "all_reduce", "4K:64M", "f32", "sum", 10, 100};
  for (int i = 1; i < argc; i += 2) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) die("missing value for ", k);
    if (!strcmp(k, "--rank")) a.rank = atoi(v);
    else if (!strcmp(k, "--ranks")) a.ranks = atoi(v);
    else if (!strcmp(k, "--kvs")) a.kvs = v;
    else if (!strcmp(k, "--json")) a.json = v;
    else if (!strcmp(k, "--op")) a.ops = v;
    else if (!strcmp(k, "--sizes")) a.sizes = v;
    else if (!strcmp(k, "--dtype")) a.dtype = v;
    else if (!strcmp(k, "--redop")) a.redop = v;
    else if (!strcmp(k, "--warmup")) a.warmup = (size_t)atoll(v);
    else if (!strcmp(k, "--iters")) a.iters = (size_t)atoll(v) ? (size_t)atoll(v) : 1;
    else die("unknown argument ", k);
  }
  if (a.rank < 0 || a.ranks < 1 || a.rank >= a.ranks || !a.kvs)
    die("usage: oneccl_bench --rank R --ranks N --kvs FILE [--json OUT] [--op ..] [--sizes ..] "
        "[--dtype f32] [--redop sum] [--warmup 10] [--iters 100]", NULL);
  return a;
}

struct job {
  int op, red, n, me;
  struct dtype dt;
  size_t send_count, recv_count, *counts;
  uint8_t *send, *recv;
  onecclComm_t comm;
};

// `iters` bare calls; result codes OR-ed and looked at once.
static onecclResult_t loop(const struct job *j, size_t iters) {
  onecclResult_t rc = 0;
  int dt = j->dt.ccl;
  size_t n = j->send_count;
  for (size_t i = 0; i < iters; i++) {
    switch (j->op) {
      case ALL_REDUCE: rc |= onecclAllReduce(j->send, j->recv, n, dt, j->red, j->comm, NULL); break;
      case ALL_GATHER: rc |= onecclAllGather(j->send, j->recv, n, dt, j->comm, NULL); break;
      case REDUCE_SCATTER:
        rc |= onecclReduceScatter(j->send, j->recv, j->recv_count, dt, j->red, j->comm, NULL);
        break;
      case ALL_TO_ALL:
        rc |= onecclAllToAllV(j->send, j->counts, j->recv, j->counts, dt, j->comm, NULL);
        break;
      case BROADCAST: rc |= onecclBroadcast(j->send, j->recv, n, dt, 0, j->comm, NULL); break;
      default: rc |= onecclReduce(j->send, j->recv, n, dt, j->red, 0, j->comm, NULL); break;
    }
  }
  return rc;
}

// Times one job; returns {mean us, median us, wrong}, averaged (times) and summed (wrong) over
// ranks through oneCCL itself.
static void run_job(struct job *j, const struct args *a, double out[3]) {
  size_t w = j->dt.size;
  for (size_t i = 0; i < j->send_count; i++) encode(&j->dt, input(j->me, i, j->red), j->send + i * w);
  check(loop(j, a->warmup), "warmup");
  size_t block = a->iters / 8 ? a->iters / 8 : 1, left = a->iters, nb = 0;
  double *per_call = malloc(sizeof(double) * (a->iters / block + 2)), total = 0;
  while (left > 0) {
    size_t k = block < left ? block : left;
    double t0 = now_s();
    check(loop(j, k), "timed loop");
    double s = now_s() - t0;
    total += s;
    per_call[nb++] = s * 1e6 / (double)k;
    left -= k;
  }
  qsort(per_call, nb, sizeof(double), cmp_double);
  double med = nb % 2 ? per_call[nb / 2] : (per_call[nb / 2 - 1] + per_call[nb / 2]) / 2;
  free(per_call);
  double wrong = 0, v;
  uint8_t want[8];
  for (size_t k = 0; k < j->recv_count; k++) {
    if (!expected(j->op, j->n, j->me, j->send_count, k, j->red, &v)) continue;
    encode(&j->dt, v, want);
    if (memcmp(j->recv + k * w, want, w) != 0) wrong++;
  }
  double mine[3] = {total * 1e6 / (double)a->iters, med, wrong};
  check(onecclAllReduce(mine, out, 3, F64, SUM, j->comm, NULL), "onecclAllReduce (results)");
  out[0] /= j->n;
  out[1] /= j->n;
}

static void env_json(char *out, size_t cap) {
  const char *keys[] = {"CCL_PLUGIN", "CCL_ATL_TRANSPORT", "CCL_ATL_SHM", "CCL_YIELD",
                        "CCL_ALLREDUCE", "CCL_WORKER_COUNT", "FI_PROVIDER", "CCL_KVS_IFACE"};
  size_t at = 0;
  out[0] = 0;
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    const char *v = getenv(keys[i]);
    if (v && at < cap)
      at += (size_t)snprintf(out + at, cap - at, "%s[\"%s\", \"%s\"]", at ? ", " : "", keys[i], v);
  }
}

int main(int argc, char **argv) {
  struct args a = parse_args(argc, argv);
  struct dtype dt = parse_dtype(a.dtype);
  int red = !strcmp(a.redop, "sum") ? SUM
            : (!strcmp(a.redop, "prod") || !strcmp(a.redop, "product")) ? PROD
            : !strcmp(a.redop, "max") ? MAX
            : !strcmp(a.redop, "min") ? MIN
            : (die("unsupported reduction ", a.redop), 0);
  size_t sizes[64], nsizes = parse_sweep(a.sizes, sizes, 64);
  const int n = a.ranks, me = a.rank;
  load_oneccl();
  onecclUniqueId id = rendezvous(me, a.kvs);
  onecclComm_t comm = NULL;
  check(onecclCommInitRank(&comm, (size_t)n, id, me), "onecclCommInitRank");
  char ops_buf[256], *rows = calloc(1, 1 << 20);
  size_t rows_at = 0;
  snprintf(ops_buf, sizeof ops_buf, "%s",
           strcmp(a.ops, "all") ? a.ops : "all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,reduce");
  for (char *save = NULL, *os = strtok_r(ops_buf, ",", &save); os; os = strtok_r(NULL, ",", &save)) {
    int o = parse_op(os);
    for (size_t si = 0; si < nsizes; si++) {
      // scen bench's sizes: the larger buffer; send count rounded down to equal chunks.
      size_t total = sizes[si] / dt.size;
      size_t sc = o == ALL_GATHER ? total / n : total;
      if (o == REDUCE_SCATTER || o == ALL_TO_ALL) sc = sc / n * n;
      size_t rc = o == ALL_GATHER ? sc * n : o == REDUCE_SCATTER ? sc / n : sc;
      size_t bytes = (o == ALL_GATHER ? sc * n : sc) * dt.size;
      double res[3] = {0, 0, 0};
      if (sc > 0) {
        struct job j = {o, red, n, me, dt, sc, rc, calloc((size_t)n, sizeof(size_t)),
                        buffer(sc * dt.size), buffer(rc * dt.size), comm};
        for (int k = 0; k < n; k++) j.counts[k] = sc / n;
        run_job(&j, &a, res);
        free(j.counts), free(j.send), free(j.recv);
      }
      if (me != 0) continue;
      double bus = o == ALL_REDUCE ? 2.0 * (n - 1) / n : (o == BROADCAST || o == REDUCE) ? 1.0 : (double)(n - 1) / n;
      double alg = res[0] > 0 ? (double)bytes / (res[0] * 1e3) : 0;
      int reduces = o == ALL_REDUCE || o == REDUCE_SCATTER || o == REDUCE;
      rows_at += (size_t)snprintf(rows + rows_at, (1 << 20) - rows_at,
          "%s    {\"op\": \"%s\", \"size_bytes\": %zu, \"count\": %zu, \"dtype\": \"%s\", "
          "\"redop\": \"%s\", \"hw\": {\"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": "
          "%.6f}, \"hw_median_us\": %.3f, \"wrong\": %llu}",
          rows_at ? ",\n" : "", op_names[o], bytes, sc, dt.name, reduces ? a.redop : "-", res[0],
          alg, alg * bus, res[1], (unsigned long long)res[2]);
    }
  }
  if (me == 0) {
    // oneCCL writes its warnings on stdout: the report goes to --json FILE when given.
    FILE *out = a.json ? fopen(a.json, "w") : stdout;
    char env[2048];
    env_json(env, sizeof env);
    if (!out) die("cannot write ", a.json);
    fprintf(out,
            "{\n  \"schema\": 1,\n  \"path\": \"baseline\",\n  \"ranks\": %d,\n  \"nodes\": 1,\n"
            "  \"warmup\": %zu,\n  \"iters\": %zu,\n  \"env\": [%s],\n  \"seed\": 0,\n  \"rows\": [\n%s\n  ],\n"
            "  \"notes\": [\"bare-loop baseline: scripts/baseline/oneccl_bench.c (oneCCL C API on "
            "libccl.so.2, own launcher)\"]\n}\n",
            n, a.warmup, a.iters, env, rows);
    if (out != stdout && fclose(out) != 0) die("cannot write ", a.json);
  }
  free(rows);
  return 0;
}
