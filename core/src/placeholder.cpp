// placeholder so the core library has a translation unit until the first concept lands.
namespace zcode { int core_placeholder() { return 0; } }
