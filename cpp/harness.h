// Host-side harness shared by the CUDA Tile programs in cpp/.
//
// It owns the program's contract with tileproof (and with a student running
// the binary by hand):
//   * the capability gate: one line naming the device and its compute
//     capability, exit 1 before any tile call below sm_80 or without a GPU;
//   * the CLI: --report PATH / TILEPROOF_REPORT, --seed N / TILEPROOF_SEED;
//   * the element check |got - want| <= atol + rtol * |want| (and got finite),
//     with the statistics each check records;
//   * the JSON check report, written (PATH.tmp, then rename) on every exit;
//   * the handover: each check's output and the inputs its reference is computed
//     from, as .npy files beside the report, listed in handover.json, so that
//     tileproof recomputes the reference itself, outside this process
//     (kernels/references.py). An array above kHandoverCapBytes is not written
//     (the C++ harness does not sample): its check stays unverified.
// Exit status: 0 only when every check passed; 1 for a failed check, a CUDA
// error, or a gate refusal; 2 for a usage error (no report: the caller's bug).
//
// Host code only. The tile kernels live in the programs themselves.
#pragma once

#include <cuda_runtime.h>

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tolerances.h"

namespace tp {

namespace tol = tileproof::tolerances;

/// What a check compares: its table entry, output shape and element type.
struct CheckSpec {
    tol::Tolerance tolerance;           ///< name, rtol and atol from the table
    std::vector<std::int64_t> shape;    ///< row-major output shape
    const char* dtype;                  ///< element type of the GPU output
};

/// The first element that failed, with its row-major index.
struct FirstFailure {
    std::vector<std::int64_t> index;
    double got;
    double want;
};

/// One check's result, as the report writes it.
struct CheckResult {
    explicit CheckResult(const CheckSpec& s) : spec(s) {}
    CheckSpec spec;
    std::int64_t checked = 0;
    std::int64_t mismatches = 0;
    std::optional<double> max_abs_err;  ///< null when nothing was compared
    std::optional<double> max_rel_err;  ///< null when no want was nonzero
    std::optional<FirstFailure> first_failure;
    bool passed = false;
};

/// Everything the report holds; one per process.
struct Report {
    std::string program;                ///< repo-relative source path
    std::string report_path;            ///< empty: no report requested
    std::uint64_t seed = 0;
    bool have_seed = false;
    bool have_device = false;
    std::string device_name;
    std::string compute_capability;
    std::string gate = "no-gpu";
    std::string gate_message;
    std::vector<CheckResult> checks;
    std::optional<CheckSpec> current;   ///< the check a CUDA error is charged to
};

inline Report& report() {
    static Report r;
    return r;
}

// --- JSON ------------------------------------------------------------------

/// A JSON string literal: quotes, backslashes and control bytes escaped.
inline std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

/// A double as JSON: %.17g when finite, else the strings "nan", "inf", "-inf".
inline std::string json_number(double v) {
    if (std::isnan(v)) return "\"nan\"";
    if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

inline std::string json_optional(const std::optional<double>& v) {
    return v ? json_number(*v) : "null";
}

inline std::string json_ints(const std::vector<std::int64_t>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        out += std::to_string(v[i]);
    }
    return out + "]";
}

inline std::string json_check(const CheckResult& c) {
    std::string first = "null";
    if (c.first_failure) {
        first = "{\"index\": " + json_ints(c.first_failure->index) +
                ", \"got\": " + json_number(c.first_failure->got) +
                ", \"want\": " + json_number(c.first_failure->want) + "}";
    }
    return "{\"name\": " + json_string(c.spec.tolerance.name) +
           ", \"shape\": " + json_ints(c.spec.shape) +
           ", \"dtype\": " + json_string(c.spec.dtype) +
           ", \"rtol\": " + json_number(c.spec.tolerance.rtol) +
           ", \"atol\": " + json_number(c.spec.tolerance.atol) +
           ", \"checked\": " + std::to_string(c.checked) +
           ", \"mismatches\": " + std::to_string(c.mismatches) +
           ", \"max_abs_err\": " + json_optional(c.max_abs_err) +
           ", \"max_rel_err\": " + json_optional(c.max_rel_err) +
           ", \"first_failure\": " + first +
           ", \"passed\": " + (c.passed ? "true" : "false") + "}";
}

/// True only when the gate let the program run, it ran a check, and all passed.
inline bool all_passed(const Report& r) {
    if (r.gate != "ok" || r.checks.empty()) return false;
    for (const auto& c : r.checks) {
        if (!c.passed) return false;
    }
    return true;
}

inline std::string json_report(const Report& r) {
    std::string device = "null";
    if (r.have_device) {
        device = "{\"name\": " + json_string(r.device_name) +
                 ", \"compute_capability\": " + json_string(r.compute_capability) + "}";
    }
    std::string checks = "[";
    for (std::size_t i = 0; i < r.checks.size(); ++i) {
        checks += (i ? ",\n  " : "\n  ") + json_check(r.checks[i]);
    }
    checks += r.checks.empty() ? "]" : "\n ]";
    return "{\"report_version\": 1, \"program\": " + json_string(r.program) +
           ", \"seed\": " + (r.have_seed ? std::to_string(r.seed) : std::string("null")) +
           ",\n \"device\": " + device +
           ",\n \"gate\": " + json_string(r.gate) +
           ", \"gate_message\": " + json_string(r.gate_message) +
           ",\n \"checks\": " + checks +
           ",\n \"passed\": " + (all_passed(r) ? "true" : "false") + "}\n";
}

/// Write the report to PATH.tmp and rename it over PATH. False on any failure.
inline bool write_report(const Report& r) {
    if (r.report_path.empty()) return true;
    const std::string tmp = r.report_path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) {
        std::fprintf(stderr, "cannot write report %s: %s\n", tmp.c_str(), std::strerror(errno));
        return false;
    }
    const std::string text = json_report(r);
    const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const bool closed = std::fclose(f) == 0;
    if (!wrote || !closed || std::rename(tmp.c_str(), r.report_path.c_str()) != 0) {
        std::fprintf(stderr, "cannot write report %s: %s\n", r.report_path.c_str(), std::strerror(errno));
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

/// Write the report and leave with `code` (1 if the report cannot be written).
[[noreturn]] inline void finish(int code) {
    const bool ok = write_report(report());
    std::fflush(stdout);
    std::exit(ok ? code : 1);
}

// --- CLI and seed ----------------------------------------------------------

[[noreturn]] inline void usage_error(const char* argv0, const std::string& problem) {
    std::fprintf(stderr, "%s: %s\nusage: %s [--report PATH] [--seed N]\n", argv0, problem.c_str(), argv0);
    std::exit(2);
}

/// Parse a whole decimal string as an unsigned 64-bit seed.
inline std::optional<std::uint64_t> parse_seed(const char* text) {
    if (!text || !*text || *text == '-' || *text == '+') return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0') return std::nullopt;
    return static_cast<std::uint64_t>(v);
}

/// A fresh seed from std::random_device, kept below 2^53 so any JSON reader holds it exactly.
inline std::uint64_t fresh_seed() {
    std::random_device rd;
    const std::uint64_t hi = rd(), lo = rd();
    return ((hi << 32) ^ lo) & ((std::uint64_t{1} << 53) - 1);
}

/// Read --report/--seed (falling back to TILEPROOF_REPORT/TILEPROOF_SEED) into the report.
inline void parse_cli(int argc, char** argv, const char* program) {
    Report& r = report();
    r.program = program;
    const char* report_arg = std::getenv("TILEPROOF_REPORT");
    const char* seed_arg = std::getenv("TILEPROOF_SEED");
    const char* seed_from = "TILEPROOF_SEED";
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&](std::string_view flag) -> const char* {
            if (a == flag) {
                if (i + 1 >= argc) usage_error(argv[0], std::string(flag) + " needs a value");
                return argv[++i];
            }
            return argv[i] + flag.size() + 1;  // --flag=VALUE
        };
        if (a == "--report" || a.starts_with("--report=")) {
            report_arg = value("--report");
        } else if (a == "--seed" || a.starts_with("--seed=")) {
            seed_arg = value("--seed");
            seed_from = "--seed";
        } else if (a == "-h" || a == "--help") {
            std::printf("usage: %s [--report PATH] [--seed N]\n", argv[0]);
            std::exit(0);
        } else {
            usage_error(argv[0], "unknown argument '" + std::string(a) + "'");
        }
    }
    if (report_arg && *report_arg) r.report_path = report_arg;
    if (seed_arg && *seed_arg) {
        const auto seed = parse_seed(seed_arg);
        if (!seed) usage_error(argv[0], std::string(seed_from) + " must be a decimal integer in [0, 2^64), got '" + seed_arg + "'");
        r.seed = *seed;
    } else {
        r.seed = fresh_seed();
    }
    r.have_seed = true;
}

// --- gate ------------------------------------------------------------------

[[noreturn]] inline void refuse(const char* gate, const std::string& line) {
    Report& r = report();
    r.gate = gate;
    r.gate_message = line;
    std::printf("%s\n", line.c_str());
    finish(1);
}

/// Print the one device line; exit 1 without a usable GPU or below sm_80.
inline void gate() {
    Report& r = report();
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaSuccess && count == 0) err = cudaErrorNoDevice;
    int device = 0;
    cudaDeviceProp prop{};
    if (err == cudaSuccess) err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess) {
        refuse("no-gpu", std::string("no usable CUDA GPU: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
    }
    r.have_device = true;
    r.device_name = prop.name;
    r.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    std::string line = "device " + std::to_string(device) + ": " + r.device_name +
                       ", compute capability " + r.compute_capability;
    if (prop.major < 8) {
        refuse("below-sm80", line + " (below 8.0: CUDA Tile needs sm_80 or newer; not running)");
    }
    r.gate = "ok";
    r.gate_message = line;
    std::printf("%s\n", line.c_str());
}

/// Parse the CLI, pass the gate, print the seed; returns the generator to draw inputs from.
inline std::mt19937_64 start(int argc, char** argv, const char* program) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep stdout lines in order with stderr when piped
    parse_cli(argc, argv, program);
    gate();
    std::printf("seed: %" PRIu64 "\n", report().seed);
    return std::mt19937_64(report().seed);
}

// --- CUDA errors -----------------------------------------------------------

/// Name the check that the next CUDA calls and the next compare() belong to.
inline void begin_check(const CheckSpec& spec) { report().current = spec; }

/// On a CUDA error: print it, charge it to the current check as a failure, exit 1.
inline void cuda_check(cudaError_t err, const char* what, const char* file, int line) {
    if (err == cudaSuccess) return;
    std::fprintf(stderr, "CUDA error: %s failed at %s:%d: %s: %s\n", what, file, line,
                 cudaGetErrorName(err), cudaGetErrorString(err));
    Report& r = report();
    if (r.current) {
        CheckResult failed{*r.current};
        r.checks.push_back(failed);
    }
    finish(1);
}

#define TP_CUDA(call) ::tp::cuda_check((call), #call, __FILE__, __LINE__)

/// After a launch: the launch error, then the execution error.
#define TP_LAUNCHED(kernel)                                                      \
    do {                                                                         \
        ::tp::cuda_check(cudaGetLastError(), "launch of " kernel, __FILE__, __LINE__); \
        ::tp::cuda_check(cudaDeviceSynchronize(), "execution of " kernel, __FILE__, __LINE__); \
    } while (0)

/// A device buffer of n elements, filled with 0xFF bytes (NaN for float).
template <typename T>
struct DeviceBuffer {
    T* ptr = nullptr;
    std::size_t n = 0;
    explicit DeviceBuffer(std::size_t count) : n(count) {
        TP_CUDA(cudaMalloc(&ptr, bytes()));
    }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    std::size_t bytes() const { return n * sizeof(T); }
    void upload(const std::vector<T>& host) {
        TP_CUDA(cudaMemcpy(ptr, host.data(), bytes(), cudaMemcpyHostToDevice));
    }
    void poison() { TP_CUDA(cudaMemset(ptr, 0xFF, bytes())); }
    std::vector<T> download() const {
        std::vector<T> host(n);
        TP_CUDA(cudaMemcpy(host.data(), ptr, bytes(), cudaMemcpyDeviceToHost));
        return host;
    }
};

// --- the handover ----------------------------------------------------------

/// Largest array written (tileproof/records/handover.py CAP_BYTES; Python samples above it, C++ withholds).
inline constexpr std::size_t kHandoverCapBytes = std::size_t{64} << 20;

/// One array a check hands over: its name, numpy type string, shape and raw little-endian bytes.
struct Handed {
    std::string key;                    ///< the reference function's keyword argument
    const char* descr;                  ///< numpy dtype.str: "<f2", "<f4", "<f8"
    std::vector<std::int64_t> shape;
    std::vector<unsigned char> bytes;
};

template <typename T>
inline const char* npy_descr() {
    if constexpr (std::is_same_v<T, float>) return "<f4";
    else if constexpr (std::is_same_v<T, double>) return "<f8";
    else if constexpr (std::is_same_v<T, std::uint16_t>) return "<f2";  // binary16 bits
    else static_assert(sizeof(T) == 0, "hand over float, double or binary16 bits (std::uint16_t)");
}

/// An input to hand over (a std::uint16_t vector is binary16 bits, as the device holds them).
template <typename T>
inline Handed input(std::string key, std::vector<std::int64_t> shape, const std::vector<T>& values) {
    const auto* p = reinterpret_cast<const unsigned char*>(values.data());
    return Handed{std::move(key), npy_descr<T>(), std::move(shape),
                  std::vector<unsigned char>(p, p + values.size() * sizeof(T))};
}

/// The .npy format, version 1.0: magic, header length, a Python dict literal padded to 64 bytes, the data.
inline std::string npy_header(const char* descr, const std::vector<std::int64_t>& shape) {
    std::string dims;
    for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
    if (shape.size() == 1) dims += ",";  // (3,) for one axis, (3, 4) for more
    std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    const std::size_t unpadded = 10 + dict.size() + 1;
    dict.append((64 - unpadded % 64) % 64, ' ');
    dict += '\n';
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(dict.size() & 0xff);
    out += static_cast<char>((dict.size() >> 8) & 0xff);
    return out + dict;
}

/// The folder of the report ("" when no report was asked for).
inline std::string handover_folder() {
    const std::string& path = report().report_path;
    if (path.empty()) return "";
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

/// Write bytes to folder/name through name.tmp and a rename. False on any failure.
inline bool write_file(const std::string& folder, const std::string& name, const std::string& head,
                       const unsigned char* data, std::size_t n) {
    const std::string path = folder + "/" + name, tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return false;
    const bool wrote = std::fwrite(head.data(), 1, head.size(), f) == head.size() &&
                       (n == 0 || std::fwrite(data, 1, n, f) == n);
    const bool closed = std::fclose(f) == 0;
    if (!wrote || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

inline std::string json_array_entry(const std::string& file, const char* descr, const std::vector<std::int64_t>& shape) {
    return "{\"file\": " + json_string(file) + ", \"dtype\": " + json_string(descr) + ", \"shape\": " +
           json_ints(shape) + "}";
}

/// Hand over check `name`'s output and inputs, then rewrite handover.json. A write failure is printed and
/// leaves the check unverified; it never changes the program's own verdict.
inline void hand_over(const char* name, const Handed& output, const std::vector<Handed>& inputs) {
    static std::vector<std::string> checks;
    const std::string folder = handover_folder();
    if (folder.empty()) return;
    if (output.bytes.size() > kHandoverCapBytes) {
        std::printf("handover: check %s's output is above %zu bytes: not handed over (unverified)\n", name,
                    kHandoverCapBytes);
        return;
    }
    const std::string out_file = std::string(name) + ".output.npy";
    bool ok = write_file(folder, out_file, npy_header(output.descr, output.shape), output.bytes.data(),
                         output.bytes.size());
    std::string in_json, withheld;
    for (const auto& in : inputs) {
        if (in.bytes.size() > kHandoverCapBytes) {
            withheld += (withheld.empty() ? "" : ", ") + json_string(in.key);
            continue;
        }
        const std::string file = std::string(name) + ".input." + in.key + ".npy";
        ok = ok && write_file(folder, file, npy_header(in.descr, in.shape), in.bytes.data(), in.bytes.size());
        in_json += (in_json.empty() ? "" : ", ") + json_string(in.key) + ": " + json_array_entry(file, in.descr, in.shape);
    }
    if (!ok) {
        std::fprintf(stderr, "handover: cannot write check %s's arrays in %s: %s\n", name, folder.c_str(),
                     std::strerror(errno));
        return;
    }
    checks.push_back("{\"name\": " + json_string(name) + ", \"output\": " +
                     json_array_entry(out_file, output.descr, output.shape) + ", \"inputs\": {" + in_json +
                     "}, \"withheld\": [" + withheld + "]}");
    std::string manifest = "{\"handover_version\": 1, \"program\": " + json_string(report().program) +
                           ", \"checks\": [";
    for (std::size_t i = 0; i < checks.size(); ++i) manifest += (i ? ",\n  " : "\n  ") + checks[i];
    manifest += "]}\n";
    if (!write_file(folder, "handover.json", manifest, nullptr, 0)) {
        std::fprintf(stderr, "handover: cannot write %s/handover.json: %s\n", folder.c_str(), std::strerror(errno));
    }
}

// --- the check -------------------------------------------------------------

/// The mixed bound: finite, and |got - want| <= atol + rtol * |want|.
inline bool element_ok(double got, double want, const tol::Tolerance& t) {
    return std::isfinite(got) && std::fabs(got - want) <= t.atol + t.rtol * std::fabs(want);
}

/// Row-major multi-index of flat position i in shape.
inline std::vector<std::int64_t> unravel(std::int64_t i, const std::vector<std::int64_t>& shape) {
    std::vector<std::int64_t> index(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        index[d] = i % shape[d];
        i /= shape[d];
    }
    return index;
}

/// Grow a running maximum; a NaN error sticks (so a NaN output shows as "nan").
inline void track_max(std::optional<double>& m, double v) {
    if (!m || std::isnan(v) || (!std::isnan(*m) && v > *m)) m = v;
}

/// Hand over got and inputs (``hand_over``), then compare every element of got against want; record,
/// print, and exit 1 on failure. `inputs`: what kernels/references.py computes the check's reference from.
template <typename G>
inline void compare(const CheckSpec& spec, const std::vector<G>& got, const std::vector<double>& want,
                    const std::vector<Handed>& inputs = {}) {
    hand_over(spec.tolerance.name, input("output", spec.shape, got), inputs);
    CheckResult c{spec};
    std::int64_t expected = 1;
    for (auto e : spec.shape) expected *= e;
    if (static_cast<std::int64_t>(got.size()) != expected || want.size() != got.size()) {
        std::fprintf(stderr, "check %s: got %zu values and %zu references for %" PRId64 " elements\n",
                     spec.tolerance.name, got.size(), want.size(), expected);
        report().checks.push_back(c);
        finish(1);
    }
    for (std::int64_t i = 0; i < expected; ++i) {
        const double g = static_cast<double>(got[i]), w = want[i];
        const double abs_err = std::fabs(g - w);
        track_max(c.max_abs_err, abs_err);
        if (w != 0.0) track_max(c.max_rel_err, abs_err / std::fabs(w));
        if (!element_ok(g, w, spec.tolerance)) {
            if (!c.first_failure) c.first_failure = FirstFailure{unravel(i, spec.shape), g, w};
            ++c.mismatches;
        }
        ++c.checked;
    }
    c.passed = c.mismatches == 0 && c.checked > 0;
    report().checks.push_back(c);
    std::printf("check %s: %" PRId64 " elements, %" PRId64 " mismatches, max abs err %.3g, max rel err %.3g "
                "(rtol %g, atol %g): %s\n",
                spec.tolerance.name, c.checked, c.mismatches, c.max_abs_err.value_or(0.0),
                c.max_rel_err.value_or(0.0), spec.tolerance.rtol, spec.tolerance.atol,
                c.passed ? "PASS" : "FAIL");
    if (!c.passed) {
        if (c.first_failure) {
            std::string idx;
            for (auto v : c.first_failure->index) idx += (idx.empty() ? "" : ", ") + std::to_string(v);
            std::printf("check %s: first failure at [%s]: got %.9g, want %.9g\n", spec.tolerance.name,
                        idx.c_str(), c.first_failure->got, c.first_failure->want);
        }
        finish(1);
    }
}

/// All checks ran and passed: write the report and exit 0.
[[noreturn]] inline void done() {
    if (!all_passed(report())) {
        std::fprintf(stderr, "no check ran\n");
        finish(1);
    }
    std::printf("all %zu checks passed\n", report().checks.size());
    finish(0);
}

}  // namespace tp
