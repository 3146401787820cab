-- spec/modules_spec.lua -- what perfmon's modules put in package.loaded.
--
-- Lua names the function of each frame of a traceback, and of an argument
-- error, by searching package.loaded two levels deep with lua_next
-- (lauxlib.c's pushglobalfuncname); busted takes a traceback for every
-- test it declares.  So every table perfmon leaves there is a face
-- (perfmon.module): empty to lua_next, its module's fields behind __index.
-- Ground truth is that search's length, counted here as lauxlib walks it.

local core = require("perfmon.loader")
local module = require("perfmon.module")

-- The classes, whose table is their objects' metatable and is compared
-- with getmetatable: they stay plain tables.
local CLASSES = { ["perfmon.profiler"] = true, ["perfmon.plugin_watcher"] = true }

-- Every module under lua/perfmon, by name.
local function module_names()
  local names = {}
  local p = assert(io.popen("cd lua && find perfmon -name '*.lua' | sort"))
  for path in p:lines() do
    names[#names + 1] = path:gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
  end
  p:close()
  assert(#names >= 20, "found " .. #names .. " modules under lua/perfmon")
  return names
end

-- The entries pushglobalfuncname visits: each string key of
-- package.loaded, and each string key of a table found there; those of
-- perfmon's modules only, if asked.
local function search_length(perfmon_only)
  local n = 0
  for k, v in next, package.loaded do
    if type(k) == "string" and (not perfmon_only or k:match("^perfmon")) then
      n = n + 1
      if type(v) == "table" then
        for kk in next, v do
          if type(kk) == "string" then n = n + 1 end
        end
      end
    end
  end
  return n
end

describe("perfmon's modules in package.loaded", function()
  it("add one entry each to the search that names a function, classes their fields", function()
    local names = module_names()
    local loaded_before, before = {}, search_length(true)
    for _, name in ipairs(names) do loaded_before[name] = package.loaded[name] ~= nil end
    local class_fields, added = 0, 0
    for _, name in ipairs(names) do
      local m = require(name)
      if not loaded_before[name] then
        added = added + 1
        if CLASSES[name] then
          for _ in next, m do class_fields = class_fields + 1 end
        end
      end
      if type(m) == "table" and not CLASSES[name] then assert.is_nil(next(m), name .. " is a plain table") end
    end
    assert.are.equal(core, package.loaded["perfmon.core"])
    assert.is_nil(next(core), "perfmon.core is a plain table")
    assert.is_function(core.open)
    local grown = search_length(true) - before
    assert.are.equal(added + class_fields, grown,
      ("the search grew by %d entries for %d modules"):format(grown, added))
  end)

  it("list their functions with pairs and take writes through", function()
    local perfmon = require("perfmon")
    local listed = {}
    for k, v in pairs(perfmon) do listed[k] = v end
    assert.is_function(listed.monitor)
    assert.is_function(listed.snapshot)
    assert.are.equal(perfmon.monitor, listed.monitor)
    local real = perfmon.snapshot
    perfmon.snapshot = function() return "replaced" end
    assert.is_nil(next(perfmon))
    assert.are.equal("replaced", perfmon.snapshot())
    perfmon.snapshot = real
    assert.are.equal(real, perfmon.snapshot)
  end)

  it("keep a module's __call", function()
    local handler = require("perfmon.busted")
    assert.is_function(getmetatable(handler).__call)
  end)

  it("name the public function in argument errors", function()
    local perfmon = require("perfmon")
    local ok, err = pcall(perfmon.group, 42)
    assert.is_false(ok)
    assert.matches("perfmon.group", err, 1, true)
  end)

  it("are made by perfmon.module, of a table only", function()
    assert.has_error(function() module(42) end,
      "bad argument #1 to 'perfmon.module' (table expected, got number)")
    assert.has_error(function() module() end,
      "bad argument #1 to 'perfmon.module' (table expected, got no value)")
  end)
end)

-- Every module's public functions name themselves as docs/api.md writes
-- them, however they are called: Lua's own name for the caller is "?" by
-- pcall and the local's name through a local, and a face (above) gives
-- lauxlib's search nothing to find.
describe("perfmon's argument errors, in every module", function()
  local function fn() end
  -- { module, the call as written, function, arguments, the message }
  local CASES = {
    { "perfmon", "perfmon.group", function() return require("perfmon").group end, { 42 },
      "bad argument #1 to 'perfmon.group' (table expected, got number)" },
    { "perfmon.fleet", "perfmon.fleet.publish", function() return require("perfmon.fleet").publish end,
      { nil, 42 }, "bad argument #2 to 'perfmon.fleet.publish' (string expected, got number)" },
    { "perfmon.buckets", "perfmon.buckets.name", function() return require("perfmon.buckets").name end,
      { "3" }, "bad argument #1 to 'perfmon.buckets.name' (bucket number (integer 0..10) expected, got string)" },
    { "perfmon.text", "perfmon.text.utf8", function() return require("perfmon.text").utf8 end,
      { 42 }, "bad argument #1 to 'perfmon.text.utf8' (string expected, got number)" },
    { "perfmon.table", "perfmon.table.figure", function() return require("perfmon.table").figure end,
      { "3" }, "bad argument #1 to 'perfmon.table.figure' (number expected, got string)" },
    { "perfmon.watcher", "perfmon.watcher.configure", function() return require("perfmon.watcher").configure end,
      { { jank_treshold_us = 1 } }, "bad argument #1 to 'perfmon.watcher.configure' (unknown setting \"jank_treshold_us\"" },
    { "perfmon.watcher", "perfmon.watcher.add_listener",
      function() return require("perfmon.watcher").add_listener end,
      { "all", fn }, "bad argument #1 to 'perfmon.watcher.add_listener' (perfmon.group or \"*\" expected, got string)" },
    { "perfmon.plugin_watcher", "perfmon.plugin_watcher.new",
      function() return require("perfmon.plugin_watcher").new end,
      { { on_warning = fn, alert = 5 } }, "bad argument #1 to 'perfmon.plugin_watcher.new' (unknown option \"alert\"" },
    { "perfmon.plugin_watcher", "pw:poll", function() return require("perfmon.plugin_watcher").poll end,
      { nil }, "bad argument #1 to 'plugin_watcher:poll' (plugin watcher expected, got nil (call it as x:poll()))" },
    { "perfmon.where", "perfmon.where.find", function() return require("perfmon.where").find end,
      { {}, 1, 0 }, "bad argument #1 to 'perfmon.where.find' (perfmon.profiler expected, got table)" },
    { "perfmon.profiler", "p:start", function() return require("perfmon.profiler").start end,
      { nil }, "bad argument #1 to 'profiler:start' (profiler expected, got nil (call it as x:start()))" },
    { "perfmon.profiler", "p:start (the core's check)", function()
        local p = require("perfmon.profiler").new()
        return function(...) return p:start(...) end
      end, { "1000" }, "bad argument #1 to 'profiler:start' (integer number of µs expected, got string)" },
    { "perfmon.profiler", "p:save", function()
        local p = require("perfmon.profiler").new()
        return function(...) return p:save(...) end
      end, { 42 }, "bad argument #1 to 'profiler:save' (string expected, got number)" },
    { "perfmon.gecko", "perfmon.gecko.profile", function() return require("perfmon.gecko").profile end,
      { nil }, "bad argument #1 to 'perfmon.gecko.profile' (profiler records (core.profiler_dump's) expected, got nil)" },
    { "perfmon.gecko", "perfmon.gecko.encode", function() return require("perfmon.gecko").encode end,
      { { f = fn } }, "bad argument #1 to 'perfmon.gecko.encode' (cannot write a function)" },
    { "perfmon.flamegraph", "perfmon.flamegraph.svg", function() return require("perfmon.flamegraph").svg end,
      { {}, { widht = 800 } }, "bad argument #2 to 'perfmon.flamegraph.svg' (unknown option \"widht\"" },
    { "perfmon.busted", "perfmon.busted.modules", function() return require("perfmon.busted").modules end,
      { "src/" }, "bad argument #1 to 'perfmon.busted.modules' (table expected, got string)" },
  }

  for _, case in ipairs(CASES) do
    local name, call, get, argv, message = case[1], case[2], case[3], case[4], case[5]
    it(("%s: %s names itself by pcall and through a local"):format(name, call), function()
      local f = get()
      local ok, err = pcall(f, table.unpack(argv, 1, 3))
      assert.is_false(ok)
      assert(tostring(err):find(message, 1, true), ("%q lacks %q"):format(tostring(err), message))
      local some_local = f
      ok, err = pcall(function() some_local(table.unpack(argv, 1, 3)) end)
      assert.is_false(ok)
      assert(tostring(err):find(message, 1, true), ("%q lacks %q"):format(tostring(err), message))
      -- at the caller's line
      assert.matches("modules_spec.lua:%d+: bad argument", tostring(err))
    end)
  end
end)
