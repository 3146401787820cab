--- perfmon.text: the text perfmon writes: names as valid UTF-8, and JSON
-- through lua-cjson.
--
-- Names are bytes: a group's name is what the host gave, a chunk's name
-- what load was given (and Lua's short_src may cut it in the middle of a
-- character), a function's name what the profiler kept of it.  JSON must be
-- UTF-8, and lua-cjson passes bytes through unchecked, so text.json writes
-- every name through text.utf8; the flame graph's SVG does too.

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

----------------------------------------------------------------------------
-- JSON
----------------------------------------------------------------------------

-- lua-cjson, made at the first text.json: perfmon itself loads without
-- it.  An instance of its own, so that the settings below leave the host's
-- require("cjson") as it was.
local cjson

--- JSON null, for the places of a text.array that hold no value.
text.null = setmetatable({}, { __tostring = function() return "null" end })

local ARRAY = {}

--- Marks t (a new table if nil) as a JSON array and returns it.
function text.array(t)
  return setmetatable(t or {}, ARRAY)
end

-- Debian 12's lua-cjson (2.1.0) writes an empty table as {} and every
-- number with at most 14 significant digits, so the containers and the
-- integers (a time in µs since the epoch has 16 digits) are written here
-- and cjson writes the rest: strings with their escapes, and floats.
local function encode(v, out)
  if v == text.null then
    out[#out + 1] = "null"
  elseif type(v) == "table" then
    if getmetatable(v) == ARRAY then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then
          error("text.json: object key must be a string, got " .. type(k), 2)
        end
        keys[#keys + 1] = k
      end
      table.sort(keys) -- the same text for the same value
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = cjson.encode(k)
        out[#out + 1] = ":"
        encode(v[k], out)
      end
      out[#out + 1] = "}"
    end
  elseif math.type(v) == "integer" then
    out[#out + 1] = ("%d"):format(v)
  else
    out[#out + 1] = cjson.encode(v)
  end
end

--- The JSON text of v, valid UTF-8: tables marked with text.array are
-- arrays, other tables objects with string keys; text.null is null.
function text.json(v)
  if not cjson then
    cjson = require("cjson").new()
    cjson.encode_invalid_numbers("null") -- NaN and infinities: no value to show
  end
  local out = {}
  encode(v, out)
  -- outside strings cjson writes ASCII only, so an invalid byte is in a
  -- string, and replacing it keeps the text JSON
  return text.utf8(table.concat(out))
end

return text
