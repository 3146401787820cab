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
