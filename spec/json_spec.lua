-- JSON: perfmon.text.json, which perfmon.json and the Gecko export write
-- through, in Lua (Lite XL's release builds cannot load lua-cjson), checked
-- against lua-cjson here.  Debian 12's lua-cjson (2.1.0) writes an empty
-- table as {} and numbers with 14 significant digits; these cases are where
-- that would show: empty lists, integers of more digits, floats that are
-- not numbers.

local text = require("perfmon.text")
local gecko = require("perfmon.gecko")
local cjson = require("cjson")

describe("perfmon.text.json", function()
  it("writes an empty list as [] and an empty object as {}", function()
    assert.are.equal('{"a":[],"b":{},"c":[[],{}]}',
      text.json{ a = text.array(), b = {}, c = text.array{ text.array(), {} } })
  end)

  it("writes every digit of an integer", function()
    local big = { (1 << 53) + 1, math.maxinteger, math.mininteger, 1795470263567771 }
    local s = text.json(text.array(big))
    assert.are.equal(("[%d,%d,%d,%d]"):format(table.unpack(big)), s)
  end)

  it("writes floats as cjson reads them back, and NaN and infinities as null", function()
    local back = cjson.decode(text.json(text.array{ 0.1, 1e300, -2.5e-300, 1 / 3, 0 / 0, math.huge, -math.huge }))
    assert.are.equal(0.1, back[1])
    assert.are.equal(1e300, back[2])
    assert.are.equal(-2.5e-300, back[3])
    assert.is_true(math.abs(back[4] - 1 / 3) < 1e-13)
    for i = 5, 7 do assert.are.equal(cjson.null, back[i]) end
  end)

  it("escapes strings and writes invalid UTF-8 as U+FFFD", function()
    local s = 'q"b\\s/n\nt\tc\1\127\xff\xc3'
    local out = text.json{ [s] = text.array{ s, true, false, text.null } }
    assert.is_not_nil(utf8.len(out))
    local want = 'q"b\\s/n\nt\tc\1\127\u{FFFD}\u{FFFD}'
    local back = cjson.decode(out)
    assert.are.same({ want, true, false, cjson.null }, back[want])
  end)

  it("writes an object's keys in order, the same text for the same value", function()
    assert.are.equal('{"a":1,"b":2,"c":{"x":3,"y":4}}',
      text.json{ c = { y = 4, x = 3 }, b = 2, a = 1 })
  end)

  it("refuses an object key that is not a string", function()
    local ok, err = pcall(text.json, { [1] = 1 })
    assert.is_false(ok)
    assert.matches("object key must be a string, got number", err)
  end)

  it("writes strings and floats as lua-cjson does, byte for byte, with no C module", function()
    -- the ground truth: an instance of lua-cjson set as perfmon's JSON
    -- was written before it wrote its own (NaN and infinities as null)
    local truth = cjson.new()
    truth.encode_invalid_numbers("null")
    for byte = 0, 255 do
      local s = ("a%cz"):format(byte)
      assert.are.equal(text.utf8(truth.encode{ [s] = s }), text.json{ [s] = s }, ("byte %d"):format(byte))
    end
    local floats = { 1.0, -0.0, 0.1, 1 / 3, -2.5e-300, 1e300, 2 ^ 53, 2 ^ 63, 1.5e15, 123456.789e3,
      5e-324, math.pi, 0 / 0, math.huge, -math.huge }
    for _, x in ipairs(floats) do
      assert.are.equal(truth.encode(x), text.json(x), ("%a"):format(x))
    end
  end)

  it("refuses a value JSON has no text for", function()
    local ok, err = pcall(text.json, { f = print })
    assert.is_false(ok)
    assert.matches("cannot write a function", err)
    -- as an argument error of the function the API names, at the caller's line
    local function line_err(v) return select(2, pcall(function() local s = text.json(v) return s end)) end
    assert.are.equal(("%s:%d: bad argument #1 to 'perfmon.text.json' (cannot write a function)")
      :format(debug.getinfo(1, "S").short_src, debug.getinfo(1, "l").currentline - 2), line_err({ a = { b = print } }))
    assert.matches("bad argument #1 to 'perfmon.text.json' (object key must be a string, got number)",
      line_err({ [1] = 1 }), 1, true)
    -- a table inside itself is refused, not a stack overflow; and nothing
    -- deeper than text.decode reads back
    local cycle = {}
    cycle.again = cycle
    assert.matches("bad argument #1 to 'perfmon.text.json' (nested deeper than 64: a table inside itself?)",
      line_err(cycle), 1, true)
    local deep = {}
    for _ = 1, 64 do deep = { a = deep } end
    assert.matches("nested deeper than 64", line_err(deep), 1, true)
    deep = text.array{}
    for _ = 1, 63 do deep = text.array{ deep } end
    assert.are.same(text.decode(text.json(deep)), text.decode(("["):rep(64) .. ("]"):rep(64)))
  end)
end)

describe("perfmon.text.decode", function()
  it("reads back what text.json wrote, every integer exact", function()
    local v = { a = text.array{ (1 << 53) + 1, math.maxinteger, math.mininteger, 0, -1 },
      b = { c = "q\"b\\s/n\nt\tc\1\127é😀", d = text.array{ true, false, text.null } }, e = 0.1, f = 1e300 }
    local back = text.decode(text.json(v))
    for i, n in ipairs(v.a) do
      assert.are.equal(n, back.a[i])
      assert.are.equal("integer", math.type(back.a[i]))
    end
    assert.are.equal(v.b.c, back.b.c)
    assert.are.same({ true, false, text.null }, back.b.d)
    assert.are.equal(0.1, back.e)
    assert.are.equal(1e300, back.f)
    -- lua-cjson reads numbers as doubles: the reason text.decode exists
    assert.are_not.equal((1 << 53) + 1, math.tointeger(cjson.decode("[9007199254740993]")[1]))
  end)

  it("reads escapes: \\u with surrogate pairs, and NUL as a byte", function()
    assert.are.equal("é😀\0/\b\f", text.decode('"\\u00e9\\ud83d\\ude00\\u0000\\/\\b\\f"'))
  end)

  it("refuses what is not JSON, saying what and where", function()
    for _, c in ipairs{
      { "0x10", "invalid number at byte 1" }, { "[NaN]", "unexpected NaN at byte 2" },
      { "01", "invalid number at byte 1" }, { "1.", "invalid number at byte 1" }, { "+1", 'unexpected "+" at byte 1' },
      { "[1,]", 'unexpected "]" at byte 4' }, { '{"a":1,"a":2}', 'key "a" twice' },
      { '{"a" 1}', "':' expected at byte 6" }, { "[1 2]", "',' or ']' expected at byte 4" },
      { '"\\ud800"', "lone surrogate at byte 2" }, { '"\\x"', "invalid escape at byte 2" },
      { '"a\nb"', "control character in a string at byte 3" }, { '"ab', "unfinished string at byte 1" },
      { "\255", "invalid UTF-8 at byte 1" }, { "", "unexpected end at byte 1" },
      { "1 2", "text after the value at byte 3" },
      { ("["):rep(100), "nested too deep" },
    } do
      local ok, err = pcall(text.decode, c[1])
      assert.is_false(ok, c[1])
      assert.is_truthy(err:find(c[2], 1, true), ("%q: %s"):format(c[1], err))
    end
    assert.has_error(function() text.decode(42) end,
      "bad argument #1 to 'perfmon.text.decode' (string expected, got number)")
  end)
end)

describe("the Gecko export", function()
  it("writes the lists of a profile with no sample as []", function()
    local d = {
      funcs = {}, nodes = { parent = {}, func = {}, line = {} },
      samples = { time = {}, weight = {}, node = {}, thread = {} },
      start_time_us = 1795470263567771.5, interval_us = 1000, pid = 1,
    }
    local s = gecko.encode(gecko.profile(d))
    for _, list in ipairs{ '"libs":[]', '"pausedRanges":[]', '"processes":[]',
                           '"stringTable":[]', '"data":[]' } do
      assert.is_truthy(s:find(list, 1, true), list)
    end
    local g = cjson.decode(s)
    assert.are.equal(1, #g.threads)
    -- the start in whole ms, every digit of it
    assert.are.equal(1795470263567, g.meta.startTime)
  end)

  it("keeps each sample's time since the epoch", function()
    local start = 1795470263567771.5
    local d = {
      funcs = { { file = "f.lua", line = 1, what = "Lua", name = "f" } },
      nodes = { parent = { 0 }, func = { 1 }, line = { 3 } },
      samples = { time = { start + 250, start + 1250.25 }, weight = { 1, 1 },
                  node = { 1, 1 }, thread = { 1, 1 } },
      start_time_us = start, interval_us = 1000, pid = 1,
    }
    local g = cjson.decode(gecko.encode(gecko.profile(d)))
    local rows = g.threads[1].samples.data
    for i, us in ipairs(d.samples.time) do
      assert.is_true(math.abs(g.meta.startTime + rows[i][2] - us / 1000) < 1e-6)
    end
  end)
end)
