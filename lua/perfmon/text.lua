--- perfmon.text: names as valid UTF-8, for the JSON perfmon writes.
--
-- Names are bytes: a group's name is what the host gave, a chunk's name
-- what load was given (and Lua's short_src may cut it in the middle of a
-- character), a function's name what the profiler kept of it.  JSON must be
-- UTF-8, and lua-cjson passes bytes through unchecked, so perfmon.json and
-- the Gecko export (perfmon.gecko) both write names through text.utf8.

local args = require("perfmon.args")

local text = {}

local FFFD = "\u{FFFD}" -- the replacement character

--- s if it is valid UTF-8, else a copy with each byte that is not part of
-- a valid sequence replaced by U+FFFD.  Valid as Lua 5.4's utf8.len
-- (strict) reads it: no overlong forms, no surrogates, nothing above
-- U+10FFFF.
function text.utf8(s)
  if type(s) ~= "string" then
    args.error(1, "utf8", "string expected, got " .. type(s))
  end
  local _, bad = utf8.len(s)
  if not bad then return s end -- the common case: one pass in C
  local out, i = {}, 1
  while bad do -- bad: the first invalid byte at or after i
    out[#out + 1] = s:sub(i, bad - 1)
    out[#out + 1] = FFFD
    i = bad + 1
    _, bad = utf8.len(s, i)
  end
  out[#out + 1] = s:sub(i)
  return table.concat(out)
end

return text
