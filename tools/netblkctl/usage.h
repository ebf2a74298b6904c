// netblkctl's usage, as --help prints it.
#pragma once

#include <string>

// The whole usage: each command's synopsis, then what each does; start's
// and attach's options from their tables (options.h).
std::string usage_text();
