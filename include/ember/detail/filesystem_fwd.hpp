#pragma once
// std::filesystem::path declared, not defined, for headers whose functions take paths only by
// reference (a module's and a config's save and load): <filesystem> costs a file that includes
// it about 0.2 s of compile time (it brings <locale>, <iomanip>, <sstream> and <codecvt>), and a
// model file that never saves should not pay it. libstdc++ declares the type in
// <bits/fs_fwd.h>; with another standard library the whole header is included. A file that
// builds a path (from a string, with operator/) includes <filesystem> itself; the recorders'
// headers and the umbrella headers (<ember/nn.hpp>, <ember/record.hpp>) include it.
#if __has_include(<bits/fs_fwd.h>)
#include <bits/fs_fwd.h>
#else
#include <filesystem>
#endif
