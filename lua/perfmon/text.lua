--- perfmon.text: the text perfmon writes: names as valid UTF-8, and JSON.
--
-- Names are bytes: a group's name is what the host gave, a chunk's name
-- what load was given (and Lua's short_src may cut it in the middle of a
-- character), a function's name what the profiler kept of it.  JSON must be
-- UTF-8, and its string escapes pass bytes through unchecked, so text.json
-- writes every name through text.utf8; the flame graph's SVG does too.

local module = require("perfmon.module")
local args = require("perfmon.args")

local text = {}

local FFFD = "\u{FFFD}" -- the replacement character

--- s if it is valid UTF-8, else a copy with each byte that is not part of
-- a valid sequence replaced by U+FFFD.  Valid as Lua 5.4's utf8.len
-- (strict) reads it: no overlong forms, no surrogates, nothing above
-- U+10FFFF.
function text.utf8(s)
  if type(s) ~= "string" then
    args.error(1, "perfmon.text.utf8", "string expected, got " .. type(s))
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

--- JSON null, for the places of a text.array that hold no value.
text.null = setmetatable({}, { __tostring = function() return "null" end })

local ARRAY = {}

--- Marks t (a new table if nil) as a JSON array and returns it.
function text.array(t)
  return setmetatable(t or {}, ARRAY)
end

-- Written here, in Lua, with no C module: Lite XL's release builds link
-- Lua statically and cannot load lua-cjson, whose C takes Lua from its
-- host.  Strings and floats come out as lua-cjson 2.1.0 writes them (json_spec
-- compares every byte): `"`, `\`, `/` and the control bytes escaped, floats
-- with 14 significant digits, NaN and infinities as null.  Integers are
-- written with every digit (a time in µs since the epoch has 16), an
-- empty array as [].
local WRITE_ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["/"] = "\\/", ["\b"] = "\\b",
  ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
for byte = 0, 127 do
  local c = string.char(byte)
  if c:find("%c") and not WRITE_ESCAPES[c] then WRITE_ESCAPES[c] = ("\\u%04x"):format(byte) end
end

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\/]', WRITE_ESCAPES) .. '"'
end

-- What text.json cannot write: raised as a table, so that text.json tells
-- it from a memory error and names itself, at its caller's line.
local function refuse(msg) error({ json_refused = msg }, 0) end

-- Deeper than text.decode reads back (a table inside itself, say).
local MAX_DEPTH = 64

local function encode(v, out, depth)
  if v == text.null then
    out[#out + 1] = "null"
  elseif type(v) == "table" then
    if depth > MAX_DEPTH then refuse(("nested deeper than %d: a table inside itself?"):format(MAX_DEPTH)) end
    if getmetatable(v) == ARRAY then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out, depth + 1)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then refuse("object key must be a string, got " .. type(k)) end
        keys[#keys + 1] = k
      end
      table.sort(keys) -- the same text for the same value
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = encode_string(k)
        out[#out + 1] = ":"
        encode(v[k], out, depth + 1)
      end
      out[#out + 1] = "}"
    end
  elseif math.type(v) == "integer" then
    out[#out + 1] = ("%d"):format(v)
  elseif type(v) == "number" then
    out[#out + 1] = (v ~= v or v == math.huge or v == -math.huge) and "null"
      or ("%.14g"):format(v)
  elseif type(v) == "string" then
    out[#out + 1] = encode_string(v)
  elseif type(v) == "boolean" then
    out[#out + 1] = tostring(v)
  else
    refuse("cannot write a " .. type(v))
  end
end

--- The JSON text of v, valid UTF-8: tables marked with text.array are
-- arrays, other tables objects with string keys; text.null is null.
function text.json(v)
  local out = {}
  local ok, err = pcall(encode, v, out, 1)
  if not ok then
    if type(err) == "table" and err.json_refused then args.error(1, "perfmon.text.json", err.json_refused) end
    error(err, 0)
  end
  -- outside strings everything written is ASCII, so an invalid byte is in
  -- a string, and replacing it keeps the text JSON
  return text.utf8(table.concat(out))
end

----------------------------------------------------------------------------
-- Reading JSON back
----------------------------------------------------------------------------

-- lua-cjson reads every number as a double, which rounds the integers
-- text.json writes past 2^53, and it takes what JSON is not (0x10, NaN);
-- perfmon reads its own JSON back here, exactly and strictly.

local function decode_error(msg, pos)
  error(("%s at byte %d"):format(msg, pos), 0)
end

-- The first byte at or after pos that is not JSON whitespace.
local function skip(s, pos)
  return s:find("[^ \t\n\r]", pos) or #s + 1
end

local ESCAPES = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f",
  n = "\n", r = "\r", t = "\t" }

-- The string whose opening quote is at pos; returns it and the position
-- after its closing quote.
local function decode_string(s, pos)
  local out, i = {}, pos + 1
  while true do
    local j = s:find("[\0-\31\"\\]", i)
    if not j then decode_error("unfinished string", pos) end
    out[#out + 1] = s:sub(i, j - 1)
    local c = s:sub(j, j)
    if c == '"' then return table.concat(out), j + 1 end
    if c ~= "\\" then decode_error("control character in a string", j) end
    local e = s:sub(j + 1, j + 1)
    if ESCAPES[e] then
      out[#out + 1], i = ESCAPES[e], j + 2
    elseif e == "u" then
      local hex = s:match("^%x%x%x%x", j + 2)
      if not hex then decode_error("\\u needs 4 hex digits", j) end
      local cp = tonumber(hex, 16)
      i = j + 6
      if cp >= 0xD800 and cp <= 0xDBFF then -- a surrogate pair
        local lo = s:match("^\\u(%x%x%x%x)", i)
        lo = lo and tonumber(lo, 16)
        if not lo or lo < 0xDC00 or lo > 0xDFFF then decode_error("lone surrogate", j) end
        cp, i = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00), i + 6
      elseif cp >= 0xDC00 and cp <= 0xDFFF then
        decode_error("lone surrogate", j)
      end
      out[#out + 1] = utf8.char(cp)
    else
      decode_error("invalid escape", j)
    end
  end
end

-- The number at pos, as JSON writes them (no 0x10, no NaN, no leading +
-- or 0): an integer when it has no fraction or exponent and fits in 64
-- bits, as Lua reads it; else a float.
local function decode_number(s, pos)
  local int, i = s:match("^(-?%d+)()", pos)
  if not int or int:find("^-?0%d") then decode_error("invalid number", pos) end
  local frac = s:match("^%.%d*", i) or ""
  i = i + #frac
  local exp = s:match("^[eE][-+]?%d*", i) or ""
  i = i + #exp
  if frac == "." or (exp ~= "" and not exp:find("%d$")) or s:find("^[%w.+-]", i) then
    decode_error("invalid number", pos)
  end
  if frac == "" and exp == "" then return tonumber(int), i end
  return tonumber(s:sub(pos, i - 1)), i
end

local decode_value

-- The object or array whose bracket is at pos; returns it and the
-- position after its closing bracket.  Keys without escapes, the common
-- case, are read in one match.
local function decode_container(s, pos, depth, close)
  if depth > 64 then decode_error("nested too deep", pos) end
  local out, n = {}, 0
  local object = close == "}"
  pos = skip(s, pos + 1)
  if s:sub(pos, pos) == close then return out, pos + 1 end
  while true do
    local v
    if object then
      local k, after = s:match('^"([^%c"\\]*)"[ \t\n\r]*:()', pos)
      if not k then
        if s:sub(pos, pos) ~= '"' then decode_error("object key expected", pos) end
        k, pos = decode_string(s, pos)
        pos = skip(s, pos)
        if s:sub(pos, pos) ~= ":" then decode_error("':' expected", pos) end
        after = pos + 1
      end
      if out[k] ~= nil then decode_error(("key %q twice"):format(k), pos) end
      v, pos = decode_value(s, skip(s, after), depth + 1)
      out[k] = v
    else
      v, pos = decode_value(s, pos, depth + 1)
      n = n + 1
      out[n] = v
    end
    local c, after = s:match("^[ \t\n\r]*([^ \t\n\r]?)()", pos)
    if c == close then return out, after end
    if c ~= "," then decode_error(("',' or '%s' expected"):format(close), after - #c) end
    pos = skip(s, after)
  end
end

local LITERALS = { ["true"] = true, ["false"] = false }

function decode_value(s, pos, depth)
  local c = s:byte(pos)
  if c == 45 or (c and c >= 48 and c <= 57) then return decode_number(s, pos) end -- - 0-9
  if c == 34 then return decode_string(s, pos) end -- "
  if c == 123 then return decode_container(s, pos, depth, "}") end -- {
  if c == 91 then return decode_container(s, pos, depth, "]") end -- [
  local word = s:match("^%a+", pos)
  if word == "null" then return text.null, pos + 4 end
  if LITERALS[word] ~= nil then return LITERALS[word], pos + #word end
  decode_error(not c and "unexpected end" or "unexpected " .. (word or ("%q"):format(string.char(c))), pos)
end

--- The value of the JSON text s: objects and arrays as tables, null as
-- text.null; an integer (no fraction, no exponent) that fits in 64 bits
-- as a Lua integer, exactly, other numbers as floats.  Strict: what is
-- not JSON (0x10, NaN, a trailing comma, a key twice, invalid UTF-8) is
-- an error saying what and at which byte.
function text.decode(s)
  if type(s) ~= "string" then
    args.error(1, "perfmon.text.decode", "string expected, got " .. type(s))
  end
  local _, bad = utf8.len(s)
  if bad then decode_error("invalid UTF-8", bad) end
  local v, pos = decode_value(s, skip(s, 1), 1)
  pos = skip(s, pos)
  if pos <= #s then decode_error("text after the value", pos) end
  return v
end

return module(text)
