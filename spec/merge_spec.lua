-- merge_spec.lua: snapshots saved as JSON, read back, subtracted and
-- merged, as a parent combines its children's.
--
-- Ground truth: each child is a real lua5.4 process running the same
-- plugins; its plugins time their own work (os.clock) and the child prints
-- that beside its snapshot's JSON.

local perfmon = require("perfmon")
local text = require("perfmon.text")
local truth = require("spec.support.truth")

-- A child: loads plugins "spell" (ms_spell per event) and "lint" (1 ms per
-- event), runs events, and prints two snapshots (before and after) and
-- what each plugin measured of itself, one per line.
local CHILD = [[
package.path, package.cpath = %q, %q
local perfmon = require("perfmon")
local function plugin(name)
  local g = perfmon.group{ name = name, kind = "plugin" }
  return assert(perfmon.load([=[
    local M = { spent = 0 }
    function M.run(ms)
      local t0 = os.clock()
      local t = t0 + ms / 1000
      while os.clock() < t do end
      M.spent = M.spent + (os.clock() - t0) * 1e6
    end
    return M]=], "=" .. name, setmetatable({}, { __index = _G }), g))()
end
local lint, spell = plugin("lint"), plugin("spell")
local mon <close> = perfmon.monitor{ "jank", "ticks", "memory" }
print(perfmon.json(mon:snapshot()))
for _ = 1, 4 do perfmon.event(function() spell.run(%d) lint.run(1) end) end
print(perfmon.json(mon:snapshot()))
print(spell.spent, lint.spent)
]]

local function child(ms_spell)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(CHILD:format(package.path, package.cpath, ms_spell))
  f:close()
  local p = assert(io.popen("lua5.4 " .. path))
  local before, after, spent = p:read("l"), p:read("l"), p:read("l")
  p:close()
  os.remove(path)
  local spell, lint = spent:match("^(%S+)%s+(%S+)$")
  return perfmon.snapshot_from_json(before), perfmon.snapshot_from_json(after),
    tonumber(spell), tonumber(lint)
end

local function by_name(snap, name)
  for _, st in pairs(snap.groups) do
    if st.name == name then return st end
  end
  error("no group " .. name)
end

-- snap with its names as perfmon.json writes them, valid UTF-8 (another
-- spec's group alive in this state may have a name that is not).
local function as_written(snap)
  for _, st in pairs(snap.groups) do st.name, st.kind = text.utf8(st.name), text.utf8(st.kind) end
  return snap
end

describe("snapshots across processes", function()
  it("reads back what perfmon.json wrote: the same snapshot", function()
    local g = perfmon.group{ name = "here", kind = "plugin" }
    local bad = perfmon.group{ name = "not \xffUTF-8", kind = "plugin" }
    local mon <close> = perfmon.monitor{ "jank", "ticks", "memory" }
    local f = assert(perfmon.load("return {}", "=here", setmetatable({}, { __index = _G }), g))
    perfmon.event(f)
    local snap = mon:snapshot()
    local back = perfmon.snapshot_from_json(perfmon.json(snap))
    assert.are.equal("not \u{FFFD}UTF-8", back.groups[bad.id].name)
    -- subtracted from the snapshot it was written from, each group pairs
    -- with its own, whatever bytes its name had
    for id, st in pairs(back:subtract(snap).groups) do
      assert.are.equal(0, st.ticks, id)
      assert.are.equal(0, st.cpu_us, id)
    end
    assert.is_true(back:equals(as_written(snap)))
    assert.is_true(back:subtract(snap):equals(snap:subtract(snap)))
    assert.are.equal(perfmon.openmetrics(snap), perfmon.openmetrics(back))
  end)

  it("merges the children's snapshots by kind and name, each figure summed", function()
    local b1, a1, spell1, lint1 = child(6)
    local b2, a2, spell2, lint2 = child(3)
    local d1, d2 = a1:subtract(b1), a2:subtract(b2)
    local before, after = perfmon.merge{ b1, b2 }, perfmon.merge{ a1, a2 }
    local d = after:subtract(before)
    truth.assert_near(by_name(d, "spell").cpu_us, spell1 + spell2, "spell, over both children")
    truth.assert_near(by_name(d, "lint").cpu_us, lint1 + lint2, "lint, over both children")
    for _, name in ipairs{ "spell", "lint" } do
      local m, x, y = by_name(d, name), by_name(d1, name), by_name(d2, name)
      for _, f in ipairs{ "cpu_us", "self_us", "ticks", "events", "alloc_bytes" } do
        assert.are.equal(x[f] + y[f], m[f], name .. "." .. f)
      end
      for k = 1, 10 do assert.are.equal(x.durations[k] + y.durations[k], m.durations[k]) end
    end
    assert.are.equal(d1.process.cpu_us + d2.process.cpu_us, d.process.cpu_us)
    -- the merged snapshot survives JSON too
    assert.is_true(perfmon.snapshot_from_json(perfmon.json(after)):equals(after))
  end)

  it("reads a snapshot written before samples were counted with none", function()
    local g = perfmon.group{ name = "older", kind = "plugin" }
    local mon <close> = perfmon.monitor{ "jank" }
    perfmon.event(assert(perfmon.load("return 1", "=older", setmetatable({}, { __index = _G }), g)))
    local snap = mon:snapshot()
    -- perfmon.json sorts the keys: neither field is an object's last
    local s, n = perfmon.json(snap):gsub('"samples":%d+,', "")
    local older, m = s:gsub('"self_samples":%d+,', "")
    assert.are.equal(n, m)
    assert.is_true(n >= 2) -- the process's and the group's
    local back = perfmon.snapshot_from_json(older)
    assert.are.equal(0, back.process.samples)
    assert.are.equal(0, back.groups[g.id].self_samples)
    -- every other figure as written (the process's samples are totals
    -- since the state began: a sampled monitor run before counted some)
    snap.process.samples, snap.process.self_samples = 0, 0
    for _, st in pairs(snap.groups) do st.samples, st.self_samples = 0, 0 end
    assert.is_true(back:equals(as_written(snap)))
  end)

  it("pairs a merged snapshot with a state's own by kind and name", function()
    local ga = perfmon.group{ name = "mix a", kind = "plugin" }
    local gb = perfmon.group{ name = "mix b", kind = "plugin" }
    local env_a, env_b = setmetatable({}, { __index = _G }), setmetatable({}, { __index = _G })
    local fa = assert(perfmon.load("local t = os.clock() + 0.002 while os.clock() < t do end", "=mix a", env_a, ga))
    local fb = assert(perfmon.load("local t = os.clock() + 0.002 while os.clock() < t do end", "=mix b", env_b, gb))
    local mon <close> = perfmon.monitor{ "jank", "ticks" }
    perfmon.event(fa)
    local before = mon:snapshot()
    perfmon.event(fb)
    perfmon.event(fb)
    local after = mon:snapshot()
    -- merged and not, in either order: each group's own figures
    for _, d in ipairs{ perfmon.merge{ after }:subtract(before), after:subtract(perfmon.merge{ before }) } do
      assert.is_true(d.merged)
      local want = after:subtract(before)
      for _, st in pairs(d.groups) do
        if st.name == "mix a" or st.name == "mix b" then
          local g = st.name == "mix a" and ga or gb
          assert.are.equal(want.groups[g.id].ticks, st.ticks, st.name)
          assert.are.equal(want.groups[g.id].cpu_us, st.cpu_us, st.name)
        end
      end
    end
    -- a snapshot less itself is nothing, whichever is merged
    for _, d in ipairs{ perfmon.merge{ after }:subtract(after), after:subtract(perfmon.merge{ after }) } do
      for _, st in pairs(d.groups) do
        assert.are.equal(0, st.ticks, st.name)
        assert.are.equal(0, st.cpu_us, st.name)
      end
    end
  end)

  it("refuses to pair by id the groups of two states", function()
    local g = perfmon.group{ name = "paired here", kind = "plugin" }
    local mon <close> = perfmon.monitor{ "jank" }
    local snap = mon:snapshot()
    -- the same id, another group: another state's snapshot, read back
    local other = perfmon.snapshot_from_json((perfmon.json(snap):gsub('"name":"paired here"', '"name":"there"')))
    local ok, err = pcall(function() return other:subtract(snap) end)
    assert.is_false(ok)
    assert.matches(("bad argument #1 to 'snapshot:subtract' (group %d is plugin \"there\" here but "
      .. "plugin \"paired here\" there"):format(g.id), err, 1, true)
    -- merged, they pair by kind and name
    local d = perfmon.merge{ other }:subtract(perfmon.merge{ snap })
    local names = {}
    for _, st in pairs(d.groups) do names[st.name] = true end
    assert.is_true(names.there)
  end)

  it("refuses to pair by id two states' groups of one kind and name", function()
    -- two processes that made the same groups in the same order: ids,
    -- kinds and names alike, and nothing else to tell them apart by id
    local _, a = child(1)
    local b = child(1)
    local ok, err = pcall(function() return b:subtract(a) end)
    assert.is_false(ok, "one state's snapshot less another's, paired by id")
    assert.matches("bad argument #1 to 'snapshot:subtract' (the snapshots are of two states:", err, 1, true)
    -- merged, they pair by kind and name
    local d = perfmon.merge{ b }:subtract(perfmon.merge{ a })
    assert.is_true(d.merged)
    -- and each pairs with itself, read back or not
    assert.are.equal(0, by_name(perfmon.snapshot_from_json(perfmon.json(a)):subtract(a), "spell").ticks)
    -- a snapshot written by a perfmon that did not say its state pairs by id
    local old = perfmon.snapshot_from_json((perfmon.json(b):gsub(',"state":"[^"]*"', "")))
    assert.is_nil(old.state)
    assert.are.equal(by_name(b, "spell").ticks, by_name(old:subtract(a), "spell").ticks + by_name(a, "spell").ticks)
  end)

  it("keeps apart kinds and names that one separator would join", function()
    local mon <close> = perfmon.monitor{ "jank" }
    local snap = mon:snapshot()
    -- made by hand: perfmon refuses a NUL byte in a name on every way in
    local hostile = snap:subtract(snap)
    hostile.groups = {}
    local pairs_ = { { "a\0b", "c" }, { "a", "b\0c" }, { "1:a", "b" }, { "1", ":ab" } }
    for i, kn in ipairs(pairs_) do
      local g = {}
      for k, v in pairs(snap.process) do g[k] = v end
      g.id, g.kind, g.name, g.memberships, g.ticks = i, kn[1], kn[2], {}, i
      hostile.groups[i] = g
    end
    local m = perfmon.merge{ hostile, hostile }
    local seen = 0
    for _, st in pairs(m.groups) do
      seen = seen + 1
      local i
      for j, kn in ipairs(pairs_) do
        if kn[1] == st.kind and kn[2] == st.name then i = j end
      end
      assert.are.equal(2 * i, st.ticks, st.kind .. "/" .. st.name)
    end
    assert.are.equal(4, seen)
    -- written, they would not come back: refused as perfmon.json writes
    assert.has_error(function() perfmon.json(hostile) end,
      "bad argument #1 to 'perfmon.json' (group 1's kind contains a NUL byte: \"a\\0b\")")
    -- and subtract pairs each with its own
    for _, st in pairs(m:subtract(perfmon.merge{ hostile }).groups) do
      assert.is_true(st.ticks >= 1 and st.ticks <= 4)
    end
  end)

  it("reads back every integer perfmon.json wrote, past 2^53 too", function()
    local mon <close> = perfmon.monitor{ "jank" }
    local snap = mon:snapshot()
    local values = { (1 << 53) + 1, math.maxinteger, math.mininteger, -((1 << 53) + 1), 0 }
    for i, v in ipairs(values) do snap.process[({ "ticks", "alloc_bytes", "cpu_us", "event_us", "samples" })[i]] = v end
    snap.process.durations[10], snap.process.longest = math.maxinteger, 10
    snap.time = (1 << 62) + 1
    local back = perfmon.snapshot_from_json(perfmon.json(snap))
    assert.are.equal((1 << 53) + 1, back.process.ticks)
    assert.are.equal(math.maxinteger, back.process.alloc_bytes)
    assert.are.equal(math.mininteger, back.process.cpu_us)
    assert.are.equal(math.maxinteger, back.process.durations[10])
    assert.are.equal("integer", math.type(back.process.ticks))
    assert.is_true(back:equals(as_written(snap)))
  end)

  it("refuses to write a figure it would not read back exactly", function()
    local mon <close> = perfmon.monitor{ "jank" }
    local g = perfmon.group{ name = "edited", kind = "plugin" }
    local function edited(field, v)
      local snap = mon:snapshot()
      snap.groups[g.id][field] = v
      return snap
    end
    local function refuses(snap, msg)
      local ok, err = pcall(perfmon.json, snap)
      assert.is_false(ok, msg)
      assert.matches("bad argument #1 to 'perfmon.json' (", err, 1, true)
      assert.matches(msg, err, 1, true)
    end
    -- written as %.14g, these would come back another number or not at all
    local at = ("groups[%d]."):format(g.id)
    refuses(edited("cpu_us", 123456789012345.0 + 0.5), at .. "cpu_us must be a whole number, got 1.2345678901235e+14")
    refuses(edited("ticks", 1.5), at .. "ticks must be a whole number, got 1.5")
    refuses(edited("ticks", 2.0 ^ 63), at .. "ticks must be a whole number, got 9.2233720368548e+18")
    refuses(edited("ticks", 0 / 0), at .. "ticks must be a whole number, got")
    refuses(edited("ticks", "7"), at .. "ticks must be a whole number, got string")
    refuses(edited("cpu_us", nil), at .. "cpu_us must be a whole number, got nil")
    refuses(edited("durations", { 1, 2 }), at .. "durations must be a list of 10 numbers")
    refuses(edited("memberships", { 0.5 }), at .. "memberships[1] must be a whole number, got 0.5")
    refuses(edited("id", g.id + 1), ("groups[%d] has id %d"):format(g.id, g.id + 1))
    local snap = mon:snapshot()
    snap.time = snap.time + 0.5
    refuses(snap, "time must be a whole number, got")
    snap = mon:snapshot()
    snap.process.user_us = -0.25
    refuses(snap, "process.user_us must be a whole number, got -0.25")
    -- a whole float a double holds exactly is written as the integer it is
    local back = perfmon.snapshot_from_json(perfmon.json(edited("cpu_us", 123456789012345.0)))
    assert.are.equal(123456789012345, back.groups[g.id].cpu_us)
    assert.are.equal("integer", math.type(back.groups[g.id].cpu_us))
  end)

  it("refuses what is not a snapshot, naming what is wrong", function()
    local function refuses(s, msg)
      local ok, err = pcall(perfmon.snapshot_from_json, s)
      assert.is_false(ok)
      assert.matches("bad argument #1 to 'perfmon.snapshot_from_json' (", err, 1, true)
      assert.matches(msg, err, 1, true)
    end
    refuses(42, "string expected, got number")
    refuses("{", "not JSON")
    refuses("[1, 2]", "not a snapshot: no 'groups' object")
    local mon <close> = perfmon.monitor{ "jank" }
    local good = perfmon.json(mon:snapshot())
    refuses(good:gsub('"cpu_us":%d+', '"cpu_us":"fast"', 1), "cpu_us must be a whole number, got string")
    refuses(good:gsub('"durations":%b[]', '"durations":[1,2]', 1), "durations must be a list of 10 numbers")
    refuses(good:gsub('"time":%d+', '"time":1.5', 1), "time must be a whole number, got 1.5")
    refuses(good:gsub('"samples":%d+', '"samples":-0.5', 1), "samples must be a whole number, got -0.5")
    -- what perfmon never writes: not JSON, or names it would cut
    refuses(good:gsub('"ticks":%d+', '"ticks":0x10', 1), "not JSON: invalid number at byte")
    refuses(good:gsub('"ticks":%d+', '"ticks":NaN', 1), "not JSON: unexpected NaN at byte")
    refuses(good:gsub('"ticks":%d+', '"ticks":9223372036854775808', 1),
      "ticks must be a whole number, got 9.2233720368548e+18")
    refuses(good:gsub('"name":"process"', '"name":"pro\\u0000cess"', 1), "process.name contains a NUL byte")
    refuses(good:gsub('"kind":"process"', '"kind":"pro\\u0000cess"', 1), "process.kind contains a NUL byte")
    refuses(good:gsub('"time":', '"time":1,"time":', 1), 'not JSON: key "time" twice')
    refuses(good .. ",", "not JSON: text after the value at byte")
    refuses(good:gsub("}$", ',"merged":1}'), "merged must be true or absent, got 1")
    assert.has_error(function() perfmon.merge{ 1 } end,
      "bad argument #1 to 'perfmon.merge' (snapshot expected at index 1, got number)")
    assert.has_error(function() perfmon.merge{} end, "bad argument #1 to 'perfmon.merge' (no snapshot to merge)")
  end)
end)
