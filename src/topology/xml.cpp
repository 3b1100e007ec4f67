// XML reading through libxml2 (hwloc's own XML backend, so it is already on every machine that
// has hwloc); this file only turns libxml2's tree into the small XmlElement value the loaders walk.
#include "topology/xml.hpp"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlreader.h>

#include <fstream>
#include <memory>

#include "topology/errors.hpp"

namespace strata::topo {
namespace {

const char* chars(const xmlChar* s) { return reinterpret_cast<const char*>(s); }

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
struct ReaderFree {
  void operator()(xmlTextReader* r) const { xmlFreeTextReader(r); }
};

XmlElement convert(const xmlNode* node) {
  XmlElement e;
  e.name = chars(node->name);
  e.line = static_cast<int>(xmlGetLineNo(node));
  for (const xmlAttr* a = node->properties; a; a = a->next) {
    xmlChar* value = xmlNodeListGetString(node->doc, a->children, 1);
    e.attrs.emplace_back(chars(a->name), value ? chars(value) : "");
    xmlFree(value);
  }
  for (const xmlNode* c = node->children; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE) e.children.push_back(convert(c));
  return e;
}

// Keeps libxml2's first error of a parse (later ones tend to be consequences of it). libxml2's
// error hook is per thread, so installing it around one parse is safe with other threads parsing.
struct FirstError {
  std::string message;
  int line = 0;
  bool seen = false;

  static void record(void* self, xmlErrorPtr e) {
    auto* me = static_cast<FirstError*>(self);
    if (me->seen || !e) return;
    me->seen = true;
    me->line = e->line;
    me->message = e->message ? e->message : "not well-formed XML";
    while (!me->message.empty() && me->message.back() == '\n') me->message.pop_back();
  }
};

class CaptureErrors {
 public:
  CaptureErrors() { xmlSetStructuredErrorFunc(&first, &FirstError::record); }
  ~CaptureErrors() { xmlSetStructuredErrorFunc(nullptr, nullptr); }
  FirstError first;
};

// No network, no entity expansion from outside the document, no messages on stderr: errors are
// reported through the exception below instead.
constexpr int kParseOptions = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING;

}  // namespace

const std::string* XmlElement::find(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

std::string XmlElement::get(std::string_view key, std::string_view fallback) const {
  const std::string* v = find(key);
  return v ? *v : std::string(fallback);
}

XmlElement parse_xml(std::string_view text, const std::string& source) {
  CaptureErrors errors;
  std::unique_ptr<xmlDoc, DocFree> doc(xmlReadMemory(text.data(), static_cast<int>(text.size()),
                                                     source.c_str(), nullptr, kParseOptions));
  if (!doc || errors.first.seen) {
    const FirstError& e = errors.first;
    fail(source + ": line " + std::to_string(e.line) + ": " +
         (e.seen ? e.message : std::string("not well-formed XML")));
  }
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (!root) fail(source + ": no root element");
  return convert(root);
}

std::string root_element_name(std::string_view text) {
  CaptureErrors quiet;  // a file that is not XML has no root element; that is the answer
  std::unique_ptr<xmlTextReader, ReaderFree> reader(xmlReaderForMemory(
      text.data(), static_cast<int>(text.size()), nullptr, nullptr, kParseOptions));
  if (!reader) return "";
  while (xmlTextReaderRead(reader.get()) == 1)
    if (xmlTextReaderNodeType(reader.get()) == XML_READER_TYPE_ELEMENT)
      return chars(xmlTextReaderConstName(reader.get()));
  return "";
}

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\n':
        out += "&#10;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string read_topology_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path + ": cannot open the file");
  std::string text;
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, size_t(in.gcount()));
    if (text.size() > kMaxTopologyFileBytes) {
      fail(path + ": larger than " + std::to_string(kMaxTopologyFileBytes >> 20) +
           " MiB, which no topology file is");
    }
  }
  if (in.bad()) fail(path + ": cannot read the file");
  return text;
}

}  // namespace strata::topo
