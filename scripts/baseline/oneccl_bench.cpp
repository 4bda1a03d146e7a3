// An independent oneCCL baseline for `scen bench --hw`: the same sweep (ops, sizes, dtype,
// reduction, warmup, iters, the same values and size rules), written against oneCCL's own C++
// API (ccl::allreduce(...).wait() on libccl.so.1, as oneCCL's examples do) with no code of
// scen's. One process per rank; rank 0 creates the main KVS and writes its address to a file
// the other ranks poll (scripts/bench-baseline.sh starts them). Rank 0 prints a
// `scen bench --format json` report (path "baseline") on stdout, so `scen bench --compare`
// reads it. Times: mean microseconds per call over the timed iterations, averaged over ranks
// (nccl-tests' default), and the median over blocks of iters/8 calls.
//
// usage: oneccl_bench --rank R --ranks N --kvs FILE [--json OUT] [--op all_reduce,...] [--sizes 4K:64M]
//                     [--dtype f32] [--redop sum] [--warmup 10] [--iters 100]
#include <oneapi/ccl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Args {
  int rank = -1, ranks = 0;
  std::string kvs, json, ops = "all_reduce", sizes = "4K:64M", dtype = "f32", redop = "sum";
  size_t warmup = 10, iters = 100;
};

[[noreturn]] void die(const std::string& m) {
  fprintf(stderr, "oneccl_bench: %s\n", m.c_str());
  exit(2);
}

std::vector<std::string> split(const std::string& s, char c) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, c))
    if (!x.empty()) out.push_back(x);
  return out;
}

// `4096`, `4K`, `64M`, `1G` (binary suffixes, as nccl-tests and scen).
size_t parse_size(std::string s) {
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  if (!s.empty() && s.back() == 'i') s.pop_back();
  size_t mult = 1;
  if (!s.empty() && isalpha((unsigned char)s.back())) {
    switch (toupper(s.back())) {
      case 'K': mult = 1ull << 10; break;
      case 'M': mult = 1ull << 20; break;
      case 'G': mult = 1ull << 30; break;
      default: die("bad size " + s);
    }
    s.pop_back();
  }
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (s.empty() || *end || v < 0) die("bad size " + s);
  return (size_t)llround(v * (double)mult);
}

// `4K:64M` doubles, `1K:1M:4` multiplies by 4, `1M,16M` lists.
std::vector<size_t> parse_sweep(const std::string& s) {
  std::vector<size_t> out;
  for (auto& part : split(s, ',')) {
    auto f = split(part, ':');
    if (f.size() == 1) {
      out.push_back(parse_size(f[0]));
      continue;
    }
    if (f.size() > 3) die("bad sizes " + part);
    size_t lo = std::max<size_t>(parse_size(f[0]), 1), hi = parse_size(f[1]);
    size_t k = f.size() == 3 ? (size_t)atoll(f[2].c_str()) : 2;
    if (k < 2 || hi < lo) die("bad size range " + part);
    for (size_t v = lo; v <= hi; v *= k) out.push_back(v);
  }
  if (out.empty()) die("no sizes");
  return out;
}

enum class Op { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce };
const char* op_name(Op o) {
  static const char* n[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce"};
  return n[(int)o];
}
Op parse_op(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  if (s == "all_reduce" || s == "allreduce") return Op::AllReduce;
  if (s == "all_gather" || s == "allgather") return Op::AllGather;
  if (s == "reduce_scatter" || s == "reducescatter") return Op::ReduceScatter;
  if (s == "all_to_all" || s == "alltoall") return Op::AllToAll;
  if (s == "broadcast") return Op::Broadcast;
  if (s == "reduce") return Op::Reduce;
  die("unknown op " + s);
}
bool reduces(Op o) { return o == Op::AllReduce || o == Op::ReduceScatter || o == Op::Reduce; }
double bus_factor(Op o, int n) {
  if (o == Op::AllReduce) return 2.0 * (n - 1) / n;
  if (o == Op::Broadcast || o == Op::Reduce) return 1.0;
  return (double)(n - 1) / n;
}

// The dtypes, encoded and decoded through double (the values are small integers).
struct DType {
  std::string name;
  size_t size;
  ccl::datatype ccl;
};
DType parse_dtype(const std::string& s) {
  if (s == "f32" || s == "float32") return {"f32", 4, ccl::datatype::float32};
  if (s == "f64" || s == "float64") return {"f64", 8, ccl::datatype::float64};
  if (s == "bf16" || s == "bfloat16") return {"bf16", 2, ccl::datatype::bfloat16};
  if (s == "f16" || s == "float16") return {"f16", 2, ccl::datatype::float16};
  if (s == "i32" || s == "int32") return {"i32", 4, ccl::datatype::int32};
  if (s == "i64" || s == "int64") return {"i64", 8, ccl::datatype::int64};
  if (s == "i8" || s == "int8") return {"i8", 1, ccl::datatype::int8};
  if (s == "u8" || s == "uint8") return {"u8", 1, ccl::datatype::uint8};
  die("unsupported dtype " + s);
}
uint16_t to_half(double v) {  // small non-negative integers only (exact)
  if (v == 0) return 0;
  int e = (int)std::floor(std::log2(v));
  uint32_t mant = (uint32_t)std::lround((v / std::ldexp(1.0, e) - 1.0) * 1024.0);
  return (uint16_t)(((e + 15) << 10) | mant);
}
double from_half(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  if (e == 0) return std::ldexp((double)m, -24);
  return std::ldexp(1.0 + m / 1024.0, e - 15);
}
void encode(const DType& d, double v, uint8_t* p) {
  if (d.name == "f32") { float x = (float)v; memcpy(p, &x, 4); }
  else if (d.name == "f64") memcpy(p, &v, 8);
  else if (d.name == "bf16") { float x = (float)v; uint32_t u; memcpy(&u, &x, 4); uint16_t b = (uint16_t)(u >> 16); memcpy(p, &b, 2); }
  else if (d.name == "f16") { uint16_t b = to_half(v); memcpy(p, &b, 2); }
  else if (d.name == "i32") { int32_t x = (int32_t)v; memcpy(p, &x, 4); }
  else if (d.name == "i64") { int64_t x = (int64_t)v; memcpy(p, &x, 8); }
  else if (d.name == "i8") { int8_t x = (int8_t)v; memcpy(p, &x, 1); }
  else { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); }
}
double decode(const DType& d, const uint8_t* p) {
  if (d.name == "f32") { float x; memcpy(&x, p, 4); return x; }
  if (d.name == "f64") { double x; memcpy(&x, p, 8); return x; }
  if (d.name == "bf16") { uint16_t b; memcpy(&b, p, 2); uint32_t u = (uint32_t)b << 16; float x; memcpy(&x, &u, 4); return x; }
  if (d.name == "f16") { uint16_t b; memcpy(&b, p, 2); return from_half(b); }
  if (d.name == "i32") { int32_t x; memcpy(&x, p, 4); return x; }
  if (d.name == "i64") { int64_t x; memcpy(&x, p, 8); return (double)x; }
  if (d.name == "i8") { int8_t x; memcpy(&x, p, 1); return x; }
  uint8_t x; memcpy(&x, p, 1); return x;
}

enum class Red { Sum, Prod, Max, Min };
Red parse_red(const std::string& s) {
  if (s == "sum") return Red::Sum;
  if (s == "prod" || s == "product") return Red::Prod;
  if (s == "max") return Red::Max;
  if (s == "min") return Red::Min;
  die("unsupported reduction " + s);
}
ccl::reduction ccl_red(Red r) {
  switch (r) {
    case Red::Sum: return ccl::reduction::sum;
    case Red::Prod: return ccl::reduction::prod;
    case Red::Max: return ccl::reduction::max;
    default: return ccl::reduction::min;
  }
}

// Element i of rank r's send buffer: small integers exact in every dtype up to 64 ranks.
double input(int r, size_t i, Red op) {
  if (op == Red::Prod) return r == 0 ? (double)(i % 4 + 1) : 1.0;
  return (double)((r + i) % 4);
}
double reduced(int n, size_t i, Red op) {
  double acc = input(0, i, op);
  for (int r = 1; r < n; r++) {
    double v = input(r, i, op);
    if (op == Red::Sum) acc += v;
    else if (op == Red::Prod) acc *= v;
    else if (op == Red::Max) acc = std::max(acc, v);
    else acc = std::min(acc, v);
  }
  return acc;
}
// Expected element j of rank me's receive buffer; false where the op leaves it undefined.
bool expected(Op o, int n, int me, size_t send_count, size_t j, Red op, double* v) {
  switch (o) {
    case Op::AllReduce: *v = reduced(n, j, op); return true;
    case Op::Reduce: if (me != 0) return false; *v = reduced(n, j, op); return true;
    case Op::Broadcast: *v = input(0, j, op); return true;
    case Op::AllGather: *v = input((int)(j / send_count), j % send_count, op); return true;
    case Op::ReduceScatter: *v = reduced(n, (size_t)me * (send_count / n) + j, op); return true;
    case Op::AllToAll: { size_t c = send_count / n; *v = input((int)(j / c), (size_t)me * c + j % c, op); return true; }
  }
  return false;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    std::string k = argv[i];
    if (i + 1 >= argc) die("missing value for " + k);
    std::string v = argv[++i];
    if (k == "--rank") a.rank = atoi(v.c_str());
    else if (k == "--ranks") a.ranks = atoi(v.c_str());
    else if (k == "--kvs") a.kvs = v;
    else if (k == "--json") a.json = v;
    else if (k == "--op") a.ops = v;
    else if (k == "--sizes") a.sizes = v;
    else if (k == "--dtype") a.dtype = v;
    else if (k == "--redop") a.redop = v;
    else if (k == "--warmup") a.warmup = (size_t)atoll(v.c_str());
    else if (k == "--iters") a.iters = std::max<size_t>((size_t)atoll(v.c_str()), 1);
    else die("unknown argument " + k);
  }
  if (a.rank < 0 || a.ranks < 1 || a.rank >= a.ranks || a.kvs.empty())
    die("usage: oneccl_bench --rank R --ranks N --kvs FILE [--op ..] [--sizes ..] [--dtype f32] [--redop sum] [--warmup 10] [--iters 100]");
  return a;
}

// Rank 0: the main KVS, its address written to `path` (tmp + rename). Others: poll for it.
ccl::shared_ptr_class<ccl::kvs> rendezvous(const Args& a) {
  if (a.rank == 0) {
    auto kvs = ccl::create_main_kvs();
    auto addr = kvs->get_address();
    std::string tmp = a.kvs + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f || fwrite(addr.data(), 1, addr.size(), f) != addr.size() || fclose(f) != 0)
      die("cannot write " + tmp);
    if (rename(tmp.c_str(), a.kvs.c_str()) != 0) die("cannot rename to " + a.kvs);
    return kvs;
  }
  ccl::kvs::address_type addr;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    FILE* f = fopen(a.kvs.c_str(), "rb");
    if (f) {
      size_t n = fread(addr.data(), 1, addr.size(), f);
      fclose(f);
      if (n == addr.size()) break;
    }
    if (std::chrono::steady_clock::now() > until) die("no KVS address in " + a.kvs + " after 120 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ccl::create_kvs(addr);
}

std::string env_json() {
  const char* keys[] = {"CCL_PLUGIN", "CCL_ATL_TRANSPORT", "CCL_ATL_SHM", "CCL_YIELD", "CCL_ALLREDUCE",
                        "CCL_WORKER_COUNT", "FI_PROVIDER", "CCL_KVS_IFACE"};
  std::string out;
  for (auto k : keys) {
    const char* v = getenv(k);
    if (!v) continue;
    if (!out.empty()) out += ", ";
    out += std::string("[\"") + k + "\", \"" + v + "\"]";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  std::vector<Op> ops;
  for (auto& s : split(a.ops == "all" ? "all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,reduce" : a.ops, ','))
    ops.push_back(parse_op(s));
  auto sizes = parse_sweep(a.sizes);
  DType dt = parse_dtype(a.dtype);
  Red red = parse_red(a.redop);
  const int n = a.ranks, me = a.rank;

  ccl::init();
  auto kvs = rendezvous(a);
  auto comm = ccl::create_communicator(n, me, kvs);
  const auto cdt = dt.ccl;
  const auto crd = ccl_red(red);

  std::string rows;
  for (Op o : ops) {
    for (size_t size : sizes) {
      // scen bench's sizes: the larger buffer; send count rounded down to equal chunks.
      size_t total = size / dt.size;
      size_t send_count = o == Op::AllGather ? total / n : total;
      if (o == Op::ReduceScatter || o == Op::AllToAll) send_count = send_count / n * n;
      size_t recv_count = o == Op::AllGather ? send_count * n : o == Op::ReduceScatter ? send_count / n : send_count;
      size_t bytes = (o == Op::AllGather ? send_count * n : send_count) * dt.size;
      double t_mean = 0, t_med = 0;
      uint64_t wrong = 0;
      if (send_count > 0) {
        std::vector<uint8_t> send(send_count * dt.size), recv(recv_count * dt.size);
        for (size_t i = 0; i < send_count; i++) encode(dt, input(me, i, red), &send[i * dt.size]);
        auto call = [&]() {
          switch (o) {
            case Op::AllReduce: ccl::allreduce(send.data(), recv.data(), send_count, cdt, crd, comm).wait(); break;
            case Op::AllGather: ccl::allgather(send.data(), recv.data(), send_count, cdt, comm).wait(); break;
            case Op::ReduceScatter: ccl::reduce_scatter(send.data(), recv.data(), recv_count, cdt, crd, comm).wait(); break;
            case Op::AllToAll: ccl::alltoall(send.data(), recv.data(), send_count / n, cdt, comm).wait(); break;
            case Op::Broadcast: ccl::broadcast(send.data(), recv.data(), send_count, cdt, 0, comm).wait(); break;
            case Op::Reduce: ccl::reduce(send.data(), recv.data(), send_count, cdt, crd, 0, comm).wait(); break;
          }
        };
        for (size_t i = 0; i < a.warmup; i++) call();
        // Timed in blocks of iters/8 (as scen's loop is) for a median robust to load bursts.
        size_t block = std::max<size_t>(a.iters / 8, 1), left = a.iters;
        std::vector<double> per_call;
        double total_s = 0;
        while (left > 0) {
          size_t k = std::min(block, left);
          auto t0 = std::chrono::steady_clock::now();
          for (size_t i = 0; i < k; i++) call();
          double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          total_s += s;
          per_call.push_back(s * 1e6 / k);
          left -= k;
        }
        std::sort(per_call.begin(), per_call.end());
        size_t m = per_call.size();
        double med = m % 2 ? per_call[m / 2] : (per_call[m / 2 - 1] + per_call[m / 2]) / 2;
        for (size_t j = 0; j < recv_count; j++) {
          double v;
          if (!expected(o, n, me, send_count, j, red, &v)) continue;
          uint8_t buf[8];
          encode(dt, v, buf);
          if (decode(dt, &recv[j * dt.size]) != decode(dt, buf)) wrong++;
        }
        // Average the times over ranks and sum the wrong counts (through oneCCL itself).
        std::vector<double> mine = {total_s * 1e6 / (double)a.iters, med, (double)wrong}, all(3);
        ccl::allreduce(mine.data(), all.data(), 3, ccl::datatype::float64, ccl::reduction::sum, comm).wait();
        t_mean = all[0] / n;
        t_med = all[1] / n;
        wrong = (uint64_t)all[2];
      }
      if (me != 0) continue;
      char row[1024];
      auto timing = [&](double us) {
        double alg = us > 0 ? (double)bytes / (us * 1e3) : 0;
        char t[256];
        snprintf(t, sizeof t, "{\"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f}", us, alg,
                 alg * bus_factor(o, n));
        return std::string(t);
      };
      snprintf(row, sizeof row,
               "    {\"op\": \"%s\", \"size_bytes\": %zu, \"count\": %zu, \"dtype\": \"%s\", \"redop\": \"%s\", "
               "\"hw\": %s, \"hw_median_us\": %.3f, \"wrong\": %llu}",
               op_name(o), bytes, send_count, dt.name.c_str(), reduces(o) ? a.redop.c_str() : "-",
               timing(t_mean).c_str(), t_med, (unsigned long long)wrong);
      if (!rows.empty()) rows += ",\n";
      rows += row;
    }
  }
  if (me == 0) {
    // oneCCL writes its warnings on stdout: the report goes to --json FILE when given.
    FILE* out = a.json.empty() ? stdout : fopen(a.json.c_str(), "w");
    if (!out) die("cannot write " + a.json);
    fprintf(out, "{\n  \"schema\": 1,\n  \"path\": \"baseline\",\n  \"ranks\": %d,\n  \"nodes\": 1,\n  \"warmup\": %zu,\n"
           "  \"iters\": %zu,\n  \"env\": [%s],\n  \"seed\": 0,\n  \"rows\": [\n%s\n  ],\n"
           "  \"notes\": [\"independent baseline: scripts/baseline/oneccl_bench.cpp (oneCCL C++ API, own launcher)\"]\n}\n",
           n, a.warmup, a.iters, env_json().c_str(), rows.c_str());
    if (out != stdout && fclose(out) != 0) die("cannot write " + a.json);
    fflush(stdout);
  }
  return 0;
}
