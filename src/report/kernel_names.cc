// Kernel names: a small parser for demangled C++ names (brackets and
// commas only: what a kernel's signature needs), the short form, the long
// form, and the uniqueness of a view (kernel_names.h).
//
// The short form's rules, each from names seen in real traces
// (tests/data; docs/diagnose.md, "Kernel names"):
// - the return type ("void ", "std::enable_if<…>::type "), the parameter
//   list and "(anonymous namespace)" go;
// - namespaces go ("at::native::", "c10::"); a generic name keeps its
//   qualifier ("cutlass::Kernel<…>", "gemvx::kernel<…>");
// - arguments every kernel of a family carries go: the pointer array
//   (at::detail::Array<char*, N>, std::array<char*, N>), offset calculators,
//   load/store policies, TensorListMetadata, pointer traits;
// - wrappers give way to what they wrap: gpu_kernel_impl<F>(…)::{lambda} is
//   F, func_wrapper_t<T, F> is F, BinaryFunctor<a, b, out, F> keeps F,
//   ReduceOp<T, Ops, index, out, vt…> keeps T and Ops;
// - a lambda is named by the function it is local to and its parameters
//   (direct_copy_kernel_cuda::lambda(float): the dtype), one inside a class's
//   operator() by the class (sum_functor<float, float, float>);
// - integer suffixes go (3ul -> 3).
#include "src/report/kernel_names.h"

#include <algorithm>

#include "src/report/py_format.h"

namespace tprof::internal {

namespace {

struct Node;

// A piece of a name: text, or a bracketed list of items.
struct Part {
  char open = 0;  // 0: text; '<', '(' or '{'
  std::string text;
  std::vector<Node> items;
};

struct Node {
  std::vector<Part> parts;
};

// Deeper nesting than any compiler writes is not a kernel name (and a
// hostile trace's name must not exhaust the stack).
constexpr int kMaxDepth = 48;

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  bool parse(Node* out) {
    *out = seq(0);
    return ok_ && i_ == s_.size();
  }

 private:
  static char closing(char open) { return open == '<' ? '>' : open == '(' ? ')' : '}'; }

  Node seq(char close) {
    Node n;
    std::string text;
    auto flush = [&] {
      if (!text.empty()) n.parts.push_back(Part{0, std::move(text), {}});
      text.clear();
    };
    while (ok_ && i_ < s_.size()) {
      const char c = s_[i_];
      if (close != 0 && (c == close || c == ',')) break;
      if (c == '(' && text.ends_with("operator") && s_.substr(i_).starts_with("()")) {
        text += "()";  // the call operator's name, not a list
        i_ += 2;
        continue;
      }
      if (c == '<' || c == '(' || c == '{') {
        if (text.ends_with("operator") || depth_ >= kMaxDepth) {
          ok_ = false;  // operator<, operator<<, ...: not in kernel names
          break;
        }
        flush();
        Part p;
        p.open = c;
        const char want = closing(c);
        ++i_;
        if (i_ < s_.size() && s_[i_] == want) {
          ++i_;
          n.parts.push_back(std::move(p));
          continue;
        }
        ++depth_;
        for (;;) {
          Node item = seq(want);
          if (!ok_) break;
          p.items.push_back(std::move(item));
          if (i_ >= s_.size()) {
            ok_ = false;
            break;
          }
          if (s_[i_] == ',') {
            ++i_;
            while (i_ < s_.size() && s_[i_] == ' ') ++i_;
            continue;
          }
          if (s_[i_] == want) {
            ++i_;
            break;
          }
          ok_ = false;
          break;
        }
        --depth_;
        n.parts.push_back(std::move(p));
        continue;
      }
      if (c == '>' || c == ')' || c == '}') {
        ok_ = false;  // unbalanced ("->", "operator>")
        break;
      }
      text += c;
      ++i_;
    }
    flush();
    return n;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  int depth_ = 0;
  bool ok_ = true;
};

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  std::string out;
  for (char c : s) {
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out += c;
  }
  return out;
}

// "3ul" -> "3", "2048l" -> "2048", "-2" stays; anything else unchanged.
std::string integer_literal(std::string s) {
  std::size_t digits = s.starts_with('-') ? 1 : 0;
  const std::size_t first = digits;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == first) return s;
  const std::string_view suffix = std::string_view(s).substr(digits);
  for (std::string_view ok : {"", "u", "l", "ul", "lu", "ll", "ull", "llu"}) {
    if (suffix == ok) return s.substr(0, digits);
  }
  return s;
}

bool is_integer(std::string_view s) {
  if (s.starts_with('-')) s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A component's piece: a slice of a text part, or a bracketed part (no
// copies: names nest, and a copy per level would cost the size times the depth).
struct Piece {
  char open = 0;
  std::string_view text;
  const Part* part = nullptr;
};
using Comp = std::vector<Piece>;

// The "::"-separated components of a node (at its own level).
std::vector<Comp> components(const Node& n) {
  std::vector<Comp> out(1);
  for (const Part& p : n.parts) {
    if (p.open != 0) {
      out.back().push_back(Piece{p.open, {}, &p});
      continue;
    }
    std::string_view t = p.text;
    for (std::size_t at = t.find("::"); at != std::string_view::npos; at = t.find("::")) {
      if (at > 0) out.back().push_back(Piece{0, t.substr(0, at), nullptr});
      out.emplace_back();
      t.remove_prefix(at + 2);
    }
    if (!t.empty()) out.back().push_back(Piece{0, t, nullptr});
  }
  // Blank pieces ("> >" leaves " ") say nothing.
  for (Comp& c : out) {
    c.erase(std::remove_if(c.begin(), c.end(), [](const Piece& p) { return p.open == 0 && trim(p.text).empty(); }),
            c.end());
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const Comp& c) { return c.empty(); }), out.end());
  return out;
}

// A component's leading name ("gpu_kernel_impl", "operator()"), "" for a lambda.
std::string ident(const Comp& c) { return !c.empty() && c.front().open == 0 ? trim(c.front().text) : std::string(); }

const Part* group(const Comp& c, char open) {
  for (const Piece& p : c) {
    if (p.open == open) return p.part;
  }
  return nullptr;
}

bool is_lambda(const Comp& c) {
  if (c.size() != 1 || c.front().open != '{' || c.front().part->items.size() != 1) return false;
  const Node& inner = c.front().part->items.front();
  return !inner.parts.empty() && inner.parts.front().open == 0 && trim(inner.parts.front().text).starts_with("lambda");
}

// A plain namespace component: a name without brackets ("at", "native").
bool is_namespace(const Comp& c) {
  return c.size() == 1 && c.front().open == 0 && trim(c.front().text).find(' ') == std::string::npos;
}

// Names that say only "a kernel": they keep the component before them.
bool is_generic(std::string_view id) {
  for (std::string_view g : {"kernel", "Kernel", "Kernel2", "device_kernel", "globalKernel", "trampoline_kernel"}) {
    if (id == g) return true;
  }
  return false;
}

// Functions whose lambda is plumbing around their first template argument.
bool is_wrapper_function(std::string_view id) {
  for (std::string_view w : {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "gpu_index_kernel", "gpu_kernel_with_index"}) {
    if (id == w) return true;
  }
  return false;
}

// Arguments every kernel of a family carries (see the file comment).
bool is_plumbing(std::string_view arg) {
  for (std::string_view p : {"Array<char*", "array<char*", "TrivialOffsetCalculator<", "OffsetCalculator<",
                             "LoadWithoutCast", "StoreWithoutCast", "LoadWithCast<", "StoreWithCast<",
                             "TensorListMetadata<", "RestrictPtrTraits", "DefaultPtrTraits"}) {
    if (arg.starts_with(p)) return true;
  }
  return false;
}

struct Style {
  bool collapse = true;       // the short form (false: the long form)
  bool drop_config = false;   // drop the outermost template's leading integers
};

std::string node_text(const Node& n, const Style& st, bool outer);

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

std::vector<std::string> items_text(const Part& p, const Style& st) {
  std::vector<std::string> out;
  for (const Node& item : p.items) out.push_back(node_text(item, st, false));
  return out;
}

// One component: its name, template arguments (filtered in the short form)
// and any other brackets; `params` false drops a function's parameter list.
std::string comp_text(const Comp& c, const Style& st, bool params, bool outer) {
  const std::string id = ident(c);
  std::string out;
  for (const Piece& piece : c) {
    if (piece.open == 0) {
      std::string t = trim(piece.text);
      if (st.collapse) {
        // " const", "&": a parameter's qualifiers, not its type.
        for (std::string_view q : {" const&", " const", "&"}) {
          if (t.ends_with(q) && t.size() > q.size()) t.resize(t.size() - q.size());
        }
        if (t == "const" || t == "&" || t == "const&") continue;
      }
      if (!out.empty() && !t.empty() && (t.front() == '*' || t.front() == '&')) {
        out += t;
      } else if (!out.empty() && !t.empty() && out.back() != '(' && out.back() != '<') {
        out += " " + t;
      } else {
        out += t;
      }
      continue;
    }
    const Part& p = *piece.part;
    if (p.open == '(' && !params) continue;
    std::vector<std::string> args = items_text(p, st);
    if (p.open == '<' && st.collapse) {
      if (id == "AUnaryFunctor" || id == "BUnaryFunctor" || id == "BinaryFunctor" || id == "UnaryFunctor") {
        if (args.size() > 1) args.erase(args.begin(), args.end() - 1);
      } else if (id == "ReduceOp") {
        if (args.size() > 2) args.resize(2);
      }
      args.erase(std::remove_if(args.begin(), args.end(), [](const std::string& a) { return is_plumbing(a); }),
                 args.end());
      if (outer && st.drop_config) {
        while (args.size() > 1 && is_integer(args.front())) args.erase(args.begin());
      }
      if (args.empty()) continue;
    }
    const char close = p.open == '<' ? '>' : p.open == '(' ? ')' : '}';
    out += p.open + join(args) + close;
  }
  return out;
}

// A lambda's parameters: "lambda(float, float)"; with its number in the
// long form ("lambda(float, float)#1": lambdas of one function differ by it).
std::string lambda_text(const Comp& c, const Style& st) {
  const Node& inner = c.front().part->items.front();
  std::string s = "lambda";
  bool after = false;
  for (const Part& p : inner.parts) {
    if (p.open == '(' && !after) {
      // Appended piece by piece: GCC 12 warns wrongly (-Wrestrict) about "(" + std::string&&.
      s += '(';
      s += join(items_text(p, st));
      s += ')';
      after = true;
    } else if (p.open == 0 && after && !st.collapse) {
      s += trim(p.text);
    }
  }
  return s;
}

std::string node_text(const Node& n, const Style& st, bool outer) {
  std::vector<Comp> comps = components(n);
  if (comps.empty()) return "";
  // Namespaces: the plain names before the first component that is not one.
  std::size_t first = 0;
  while (first + 1 < comps.size() && is_namespace(comps[first])) ++first;
  if (first > 0 && is_generic(ident(comps.back())) && comps.size() - first == 1) --first;

  auto lambda_at = std::find_if(comps.begin() + static_cast<std::ptrdiff_t>(first), comps.end(), is_lambda);
  if (lambda_at != comps.end() && lambda_at != comps.begin() + static_cast<std::ptrdiff_t>(first)) {
    const std::size_t k = static_cast<std::size_t>(lambda_at - comps.begin());
    const Comp& fn = comps[k - 1];
    const std::string fid = ident(fn);
    if (!st.collapse) {
      // The long form: the function (its class first), then every lambda
      // with its number; "operator()() const" between them says nothing.
      std::string s;
      for (std::size_t i = first; i < k; ++i) s += (i > first ? "::" : "") + comp_text(comps[i], st, false, false);
      for (std::size_t i = k; i < comps.size(); ++i) {
        if (is_lambda(comps[i])) {
          s += "::" + lambda_text(comps[i], st);
        } else if (ident(comps[i]) != "operator()") {
          s += "::" + comp_text(comps[i], st, false, false);
        }
      }
      return s;
    }
    std::size_t last = k;
    for (std::size_t i = k; i < comps.size(); ++i) {
      if (is_lambda(comps[i])) last = i;
    }
    if (fid == "operator()" && k >= 2 + first) {
      // A lambda inside a class's call operator: the class.
      std::string s = comp_text(comps[k - 2], st, false, outer);
      if (const Part* t = group(fn, '<')) s += "::operator()<" + join(items_text(*t, st)) + ">";
      return s;
    }
    if (is_wrapper_function(fid)) {
      if (const Part* t = group(fn, '<'); t != nullptr && !t->items.empty()) return node_text(t->items.front(), st, outer);
    }
    return comp_text(fn, st, false, outer) + "::" + lambda_text(comps[last], st);
  }
  if (comps.size() == 1 && comps.front().size() == 1 && comps.front().front().open == 0) {
    return integer_literal(trim(comps.front().front().text));
  }
  const Comp& c = comps.back();
  if (st.collapse && ident(c) == "func_wrapper_t") {
    if (const Part* t = group(c, '<'); t != nullptr && !t->items.empty()) return node_text(t->items.back(), st, outer);
  }
  std::string s = comp_text(c, st, true, outer);
  // A generic name keeps its qualifier; so does a component that follows a
  // class ("Foo<T>::Params").
  for (std::size_t i = comps.size() - 1; i-- > first;) s = comp_text(comps[i], st, true, false) + "::" + s;
  return s;
}

// Whether a name is a C++ signature worth parsing: "Memcpy DtoD (Device ->
// Device)" and "nvjet_sm90_tst_..." are names as they are.
bool looks_cpp(std::string_view name) {
  if (name.starts_with("void ") || name.find("::") != std::string_view::npos || name.find('<') != std::string_view::npos) {
    return true;
  }
  const std::size_t paren = name.find('(');
  return paren != std::string_view::npos && paren > 0 && name.back() == ')' && name[paren - 1] != ' ';
}

std::string without_anonymous(std::string_view name) {
  std::string s(name);
  for (std::string_view anon : {"(anonymous namespace)::", "(anonymous namespace)"}) {
    for (std::size_t p = s.find(anon); p != std::string::npos; p = s.find(anon, p)) s.erase(p, anon.size());
  }
  return s;
}

// The name without its return type and parameter list, parsed; false when
// the name is not a signature the parser reads.
bool signature(std::string_view name, Node* out) {
  // Longer is not a name a compiler wrote (and not worth parsing).
  constexpr std::size_t kMaxParsed = 16384;
  if (name.size() > kMaxParsed || !looks_cpp(name)) return false;
  const std::string s = without_anonymous(name);
  Node top;
  if (!Parser(s).parse(&top) || top.parts.empty()) return false;
  // The parameter list (and a trailing " const").
  std::vector<Part>& parts = top.parts;
  if (parts.size() >= 2 && parts.back().open == 0 && trim(parts.back().text) == "const" &&
      parts[parts.size() - 2].open == '(') {
    parts.pop_back();
  }
  if (parts.size() >= 2 && parts.back().open == '(') parts.pop_back();
  // The return type: everything up to the last blank of the last top-level
  // text that has one ("void ", "std::enable_if<!(false), void>::type ").
  for (std::size_t i = parts.size(); i-- > 0;) {
    if (parts[i].open != 0) continue;
    const std::string t = parts[i].text;
    const std::size_t blank = t.find_last_of(' ');
    if (blank == std::string::npos || blank + 1 == t.size()) continue;
    parts[i].text = t.substr(blank + 1);
    parts.erase(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  }
  *out = std::move(top);
  return true;
}

// Cut to max_chars in the middle: the start says which kernel, the end
// holds the functor's parameters (the dtype) and the closing brackets. When
// the template arguments fit beside a dozen characters of the kernel's own
// name, the cut falls in the name: the arguments stay whole.
std::string cut(std::string s, std::size_t max_chars) {
  if (max_chars == 0 || py_len(s) <= max_chars) return s;
  if (max_chars < 16) return std::string(py_head(s, max_chars - 1)) + "…";
  if (const std::size_t lt = s.find('<'); lt != std::string::npos && lt > 0) {
    const std::string_view args = std::string_view(s).substr(lt);
    if (py_len(args) + 13 <= max_chars) {
      return std::string(py_head(s, max_chars - 1 - py_len(args))) + "…" + std::string(args);
    }
  }
  const std::size_t tail = std::min<std::size_t>(24, max_chars / 2);
  return std::string(py_head(s, max_chars - 1 - tail)) + "…" + std::string(py_tail(s, tail));
}

}  // namespace

std::string short_kernel_name(std::string_view name, std::size_t max_chars) {
  Node top;
  if (!signature(name, &top)) return cut(std::string(name), max_chars);
  std::string s = node_text(top, Style{}, true);
  if (s.empty()) return cut(std::string(name), max_chars);
  if (py_len(s) > max_chars) {
    // The launch configuration (vector width, block size) before the functor.
    std::string fewer = node_text(top, Style{true, true}, true);
    if (!fewer.empty() && py_len(fewer) < py_len(s)) s = std::move(fewer);
  }
  return cut(std::move(s), max_chars);
}

std::string long_kernel_name(std::string_view name) {
  Node top;
  if (!signature(name, &top)) return std::string(name);
  std::string s = node_text(top, Style{false, false}, true);
  return s.empty() ? std::string(name) : s;
}

KernelNames::KernelNames(const std::vector<std::string_view>& names, std::size_t max_chars) : max_chars_(max_chars) {
  build(names);
}

KernelNames KernelNames::plain(const std::vector<std::string_view>& names, std::size_t max_chars) {
  KernelNames out;
  out.max_chars_ = max_chars;
  out.signatures_ = false;
  out.build(names);
  return out;
}

KernelNames::KernelNames(const Trace& trace, std::size_t max_chars) : max_chars_(max_chars) {
  std::vector<char> seen(trace.strings.size(), 0);
  std::vector<std::string_view> names;
  const EventColumns& ev = trace.events;
  for (std::size_t e = 0; e < ev.size(); ++e) {
    const EventKind k = ev.kind[e];
    if (!is_device_kind(k) || k == EventKind::kGpuUserAnnotation) continue;
    const StrId id = ev.name[e];
    if (id >= seen.size() || seen[id]) continue;
    seen[id] = 1;
    names.push_back(trace.str(id));
  }
  build(names);
}

void KernelNames::build(const std::vector<std::string_view>& given) {
  std::vector<std::string_view> names;
  for (std::string_view n : given) {
    if (map_.emplace(std::string(n), std::string()).second) names.push_back(n);
  }
  std::vector<std::string> out(names.size());
  std::vector<int> level(names.size(), 0);
  for (std::size_t i = 0; i < names.size(); ++i) {
    out[i] = signatures_ ? short_kernel_name(names[i], max_chars_) : cut(std::string(names[i]), max_chars_);
  }
  // Each round lengthens the names that share a text; the third numbers them.
  for (int round = 0; round < 3; ++round) {
    std::unordered_map<std::string, std::vector<std::size_t>> by_text;
    for (std::size_t i = 0; i < names.size(); ++i) by_text[out[i]].push_back(i);
    bool collided = false;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::vector<std::size_t>& same = by_text[out[i]];
      if (same.size() < 2) continue;
      collided = true;
      if (level[i] == 0) {
        out[i] = signatures_ ? long_kernel_name(names[i]) : std::string(names[i]);
        level[i] = 1;
      } else if (round == 2 || level[i] >= 1) {
        const auto at = std::find(same.begin(), same.end(), i) - same.begin();
        if (at > 0) out[i] += " #" + std::to_string(at + 1);
        level[i] = 2;
      }
    }
    if (!collided) break;
  }
  for (std::size_t i = 0; i < names.size(); ++i) map_[std::string(names[i])] = std::move(out[i]);
}

std::string KernelNames::get(std::string_view name) const {
  auto it = map_.find(std::string(name));
  return it != map_.end() ? it->second : std::string(name);
}

}  // namespace tprof::internal
