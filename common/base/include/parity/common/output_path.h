// The rules every parity command follows for a file it writes where the user said: it names
// something (an empty --out would mean the current folder), an existing file is replaced only
// when the user allowed it (--overwrite), and a symbolic link is never written through nor
// replaced, whatever it points to (run as root, `--out /etc/passwd` or a link to it must not
// touch the password file).
#pragma once

#include <filesystem>
#include <string>

namespace parity {

// Throws InputError when `value`, the value of `option` (e.g. "--out"), is empty.
void require_output_name(const std::string& value, const std::string& option);

// Checks `path`, a file about to be written (as the value of `option`, e.g. "--out"): refuses
// (InputError naming the path and the fix) an empty path, a symbolic link, anything that is not
// a regular file, and an existing file unless `overwrite`.
void check_output_file(const std::filesystem::path& path, const std::string& option,
                       bool overwrite);

// Replaces `path` with `contents` as write_output_file does, for a caller that raises its own
// kind of error: returns why it could not ("" when it did).
std::string replace_file_without_following_links(const std::filesystem::path& path,
                                                  const std::string& contents);

// Writes `contents` to `path` so that a reader sees the old contents or the new, never a mix,
// and no link is followed: a temporary file beside `path`, created exclusively (a file or link
// planted under its name is refused, not followed), renamed over `path`. Throws InputError
// "cannot write WHAT PATH: why" when it cannot be written, or when `path` is a symbolic link
// by then (`what`: "the report file", "safetensors file", ...).
void write_output_file(const std::filesystem::path& path, const std::string& contents,
                       const std::string& what);

}  // namespace parity
