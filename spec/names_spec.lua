-- Names: what perfmon does with the bytes of group names, chunk names,
-- function names and file names (issue 14, "no silent failure").
--
-- - A NUL byte would cut a name where it enters the C core, so the API
--   refuses it: perfmon.group's name and kind, perfmon.load's chunk name,
--   perfmon.loadfile's path.
-- - The profiler keeps 47 bytes of a function's name: it cuts at a UTF-8
--   character boundary.
-- - JSON (perfmon.json, the Gecko export) is valid UTF-8 whatever bytes the
--   names hold: perfmon.text.utf8 replaces each invalid byte by U+FFFD.
-- Validity is checked for real: utf8.len (strict in Lua 5.4: no overlong
-- forms, surrogates or code points above U+10FFFF) on the whole text, and
-- cjson.decode.

local perfmon = require("perfmon")
local Profiler = require("perfmon.profiler")
local text = require("perfmon.text")
local cjson = require("cjson")

local FFFD = "\u{FFFD}"
local E40 = ("é"):rep(40) -- 80 bytes: cut at 47, a byte would be split

-- Asserts that s is valid UTF-8 JSON; returns it decoded.
local function valid_json(s)
  local n, bad = utf8.len(s)
  assert.is_not_nil(n, ("invalid UTF-8 at byte %s: %q"):format(tostring(bad),
    s:sub((bad or 1) - 10, (bad or 1) + 10)))
  local ok, v = pcall(cjson.decode, s)
  assert.is_true(ok, tostring(v))
  return v
end

-- Asserts that fn raises an error containing every string of texts, at a
-- line of this file.
local function raises(fn, texts)
  local ok, err = pcall(fn)
  assert.is_false(ok, "no error raised")
  err = tostring(err)
  assert.matches("names_spec.lua:%d+: ", err)
  for _, t in ipairs(texts) do
    assert.is_truthy(err:find(t, 1, true), err)
  end
end

local seq = 0
local function unique(prefix)
  seq = seq + 1
  return prefix .. seq
end

-- Loads src into a sandbox of a new group (name, kind "plugin") as
-- chunkname; returns what the chunk returns, and the group.
local function plugin(name, src, chunkname)
  local group = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  return assert(perfmon.load(src, chunkname, env, group))(), group
end

-- The source of a chunk returning a function that calls a function stored
-- under the key fname (any bytes) and busy for n iterations.  Not a tail
-- call: the callee keeps its name.
local function named_busy_src(fname)
  return ([[
    local t = {}
    t[%q] = function(n) local s = 0 for i = 1, n do s = s + i %% 3 end return s end
    return function() local r = t[%q](30000) return r end]]):format(fname, fname)
end

-- Profiles work until a sample's top function is called by a name that
-- starts with prefix (up to 2 s of CPU); returns the profiler and that name.
local function profile_until(work, prefix)
  local p = Profiler.new()
  p:start(500)
  local t0, name = os.clock(), nil
  repeat
    work()
    for _, x in ipairs(p:samples()) do
      local n = x.stack[1].func.name
      if n and n:sub(1, #prefix) == prefix then name = n end
    end
  until name or os.clock() - t0 > 2
  p:stop()
  assert.is_not_nil(name, "no sample of the function in 2 s of CPU")
  return p, name
end

describe("names", function()
  describe("perfmon.text.utf8", function()
    it("returns valid UTF-8 as it is", function()
      for _, s in ipairs{ "", "abc", E40, "\0x", "\u{10FFFF}", "a\u{7FF}\u{FFFF}" } do
        assert.are.equal(s, text.utf8(s))
      end
    end)

    it("replaces each invalid byte by U+FFFD", function()
      local cases = {
        { "\xff\xfe", FFFD .. FFFD },
        { "a\xc3", "a" .. FFFD }, -- a sequence cut at the end
        { "\xc3a", FFFD .. "a" },
        { "\xe2\x82a", FFFD .. FFFD .. "a" },
        { "\x80é", FFFD .. "é" }, -- a stray continuation byte
        { "\xc0\xaf", FFFD .. FFFD }, -- overlong '/'
        { "\xed\xa0\x80", FFFD .. FFFD .. FFFD }, -- a surrogate (U+D800)
        { "\xf4\x90\x80\x80", FFFD:rep(4) }, -- above U+10FFFF
        { ("é"):rep(3):sub(1, 5) .. "z", "éé" .. FFFD .. "z" },
      }
      for _, c in ipairs(cases) do
        local got = text.utf8(c[1])
        assert.are.equal(c[2], got, ("%q"):format(c[1]))
        assert.is_not_nil(utf8.len(got))
      end
    end)

    it("refuses what is not a string", function()
      raises(function() text.utf8(nil) end, { "bad argument #1 to 'perfmon.text.utf8'", "string expected" })
    end)
  end)

  describe("a NUL byte", function()
    it("is refused in a group's name and kind", function()
      raises(function() perfmon.group{ name = "\0x", kind = "plugin" } end,
        { "bad argument #1 to 'perfmon.group'", "field 'name' contains a NUL byte" })
      raises(function() perfmon.group{ name = "a\0", kind = "plugin" } end,
        { "bad argument #1 to 'perfmon.group'", "field 'name' contains a NUL byte" })
      raises(function() perfmon.group{ name = "a", kind = "plug\0in" } end,
        { "bad argument #1 to 'perfmon.group'", "field 'kind' contains a NUL byte" })
    end)

    it("is refused in perfmon.load's chunk name", function()
      raises(function() perfmon.load("return 1", "=a\0b", {}) end,
        { "bad argument #2 to 'perfmon.load'", "chunk name contains a NUL byte" })
      assert.are.equal(1, perfmon.load("return 1", "=ab", {})())
    end)

    it("is refused in fleet.publish's label, and the label is kept whole", function()
      local fleet = require("perfmon.fleet")
      raises(function() fleet.publish(perfmon.snapshot(), "three\0cut") end,
        { "bad argument #2 to 'perfmon.fleet.publish'", 'the label holds a NUL byte: "three\\0cut"' })
      -- the core's own entry refuses it too (a host calling it from Lua)
      raises(function() require("perfmon.core").fleet_publish("{}", "three\0cut") end,
        { "bad argument #2 to 'perfmon.fleet.publish'", "the label holds a NUL byte" })
      local id = fleet.publish(perfmon.snapshot(), "three " .. E40)
      for _, st in ipairs(fleet.states()) do
        if st.id == id then assert.are.equal("three " .. E40, st.label) end
      end
    end)

    it("is refused in a snapshot read back from JSON", function()
      local good = perfmon.json(perfmon.snapshot())
      raises(function() perfmon.snapshot_from_json((good:gsub('"name":"process"', '"name":"pro\\u0000cess"'))) end,
        { "bad argument #1 to 'perfmon.snapshot_from_json'", "process.name contains a NUL byte" })
    end)

    it("is named as given in a monitor's mode and probes", function()
      raises(function() perfmon.monitor{ "jank", mode = "sampled\0x" } end,
        { "bad argument #1 to 'perfmon.monitor'", 'mode "exact" or "sampled" expected, got "sampled\\0x"' })
      raises(function() perfmon.monitor{ "jank\0x" } end,
        { "bad argument #1 to 'perfmon.monitor'", 'unknown probe "jank\\0x" at index 1' })
      raises(function() perfmon.monitor{ "jank\n\0001" } end,
        { "bad argument #1 to 'perfmon.monitor'", 'unknown probe "jank\\10\\0001" at index 1' })
    end)

    it("is refused in perfmon.loadfile's path", function()
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      f:write("return 1")
      f:close()
      -- loadfile itself would open `path`: the bytes after the NUL lost
      raises(function() perfmon.loadfile(path .. "\0.lua", {}) end,
        { "bad argument #1 to 'perfmon.loadfile'", "path contains a NUL byte" })
      assert.are.equal(1, perfmon.loadfile(path, {})())
      os.remove(path)
    end)
  end)

  describe("group names", function()
    it("are kept whole, multi-byte characters and all", function()
      local g = perfmon.group{ name = E40, kind = "é" }
      assert.are.equal(E40, g.name)
      assert.are.equal("é", g.kind)
      local mon <close> = perfmon.monitor{ "jank" }
      local st = mon:snapshot().groups[g.id]
      assert.are.equal(E40, st.name)
      assert.are.equal(E40, valid_json(perfmon.json(mon:snapshot())).groups[tostring(g.id)].name)
    end)
  end)

  describe("perfmon.json", function()
    it("is valid UTF-8 JSON whatever bytes the names hold", function()
      local g = perfmon.group{ name = "bad\xff\xfe", kind = "k\xc3" }
      local mon <close> = perfmon.monitor{ "jank", "chunks" }
      -- a chunk group, named by the chunk's source name
      local f = assert(load("local s = 0 for i = 1, 1000 do s = s + i end return s",
        "=chunk\xe2\x82"))
      perfmon.event(f)
      local snap = mon:snapshot()
      local doc = valid_json(perfmon.json(snap))
      local st = doc.groups[tostring(g.id)]
      assert.are.equal("bad" .. FFFD .. FFFD, st.name)
      assert.are.equal("k" .. FFFD, st.kind)
      local chunk
      for _, s in pairs(doc.groups) do
        -- (other spec files run in this process may have chunks of their
        -- own whose names begin with "chunk")
        if s.kind == "chunk" and s.name:find("^chunk" .. FFFD) then chunk = s end
      end
      assert.is_not_nil(chunk, "no chunk group")
      assert.are.equal("chunk" .. FFFD .. FFFD, chunk.name)
      -- the snapshot itself keeps the bytes
      assert.are.equal("bad\xff\xfe", snap.groups[g.id].name)
    end)
  end)

  describe("the profiler", function()
    it("cuts a long name at a character boundary, and to_gecko() stays valid UTF-8", function()
      -- E40 as the group's name, the function's name and the chunk's name:
      -- the chunk's short_src, cut by Lua at 59 bytes, ends in half an é
      local work, group = plugin(E40, named_busy_src(E40), "=" .. E40)
      local p, name = profile_until(work, "éé")
      assert.are.equal(("é"):rep(23), name) -- 46 bytes: the 24th would not fit
      assert.is_not_nil(utf8.len(name))
      local g = valid_json(p:to_gecko())
      local cats = {}
      for _, c in ipairs(g.meta.categories) do cats[c.name] = true end
      assert.is_true(cats[E40], "the group's name is not cut")
      local label
      for _, th in ipairs(g.threads) do
        for _, s in ipairs(th.stringTable) do
          if s:find(name, 1, true) == 1 then label = s end
        end
      end
      assert.is_not_nil(label, "no label of the function")
      -- Lua's short_src: 29 é and the first byte of the 30th
      assert.are.equal(("%s (%s%s:2:0)"):format(name, ("é"):rep(29), FFFD), label)
      assert.is_truthy(group.id)
    end)

    it("writes invalid bytes of names to the Gecko profile as U+FFFD", function()
      local gname = unique("g\xff")
      local work = plugin(gname, named_busy_src("f\xff\xfe"), "=c\xc3")
      local p, name = profile_until(work, "f\xff")
      assert.are.equal("f\xff\xfe", name) -- results() keep the bytes
      local g = valid_json(p:to_gecko())
      local cats = {}
      for _, c in ipairs(g.meta.categories) do cats[c.name] = true end
      assert.is_true(cats[text.utf8(gname)])
      local found = false
      for _, th in ipairs(g.threads) do
        for _, s in ipairs(th.stringTable) do
          if s == ("f%s%s (c%s:2:0)"):format(FFFD, FFFD, FFFD) then found = true end
        end
      end
      assert.is_true(found, "no label of the function")
    end)
  end)

  describe("the flame graph", function()
    it("cuts labels between characters and writes no byte XML refuses", function()
      local gecko = require("perfmon.gecko")
      local flamegraph = require("perfmon.flamegraph")
      local d = {
        funcs = { { file = "f.lua", line = 1, what = "Lua", name = E40 },
                  { file = "f.lua", line = 2, what = "Lua", name = "ctl\1\31\xff" } },
        nodes = { parent = { 0, 0 }, func = { 1, 2 }, line = { 3, 4 }, self = { 1, 1 },
                  total = { 1, 1 } },
        samples = { time = { 1e9, 1e9 + 1000 }, weight = { 1, 1 }, node = { 1, 2 },
                    thread = { 1, 1 } },
        start_time_us = 1e9, interval_us = 1000, pid = 1,
      }
      local profile = valid_json(gecko.encode(gecko.profile(d)))
      -- 414 px: a box of half the width holds 27 characters, not all of
      -- E40: 25 and "..", which in bytes would have split the 13th é
      local svg = flamegraph.svg(profile, { width = 414, title = "t\2" })
      assert.is_not_nil(utf8.len(svg), "invalid UTF-8")
      assert.is_nil(svg:find("[%z\1-\8\11\12\14-\31]"), "a control character")
      assert.is_truthy(svg:find(">" .. ("é"):rep(25) .. "..<", 1, true), "no cut label")
      assert.is_truthy(svg:find("ctl" .. FFFD:rep(3), 1, true))
    end)
  end)
end)
