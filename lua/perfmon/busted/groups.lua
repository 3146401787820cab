--- perfmon.busted.groups: the groups perfmon.busted charges the code of a
-- busted run to: one per module under test (kind "module", by path
-- prefix) and one per spec file (kind "spec", a library), each a group by
-- source.
--
-- Busted's and luassert's own Lua code is in no group: perfmon's self time
-- rule (docs/api.md, "Self time") makes it transparent, so an assertion's
-- time is the self time of the spec file that called it, and the code that
-- runs the tests is in no group's time, only in the test's and the file's.

local module = require("perfmon.module")
local perfmon = require("perfmon")
local args = require("perfmon.args")

local M = {}

-- The default module prefixes: src/ and each lua/<module>/ under the
-- current directory.
local function default_modules()
  local pl_path, pl_dir = require("pl.path"), require("pl.dir")
  local mods = {}
  if pl_path.isdir("src") then mods[#mods + 1] = "src/" end
  if pl_path.isdir("lua") then
    local dirs = pl_dir.getdirectories("lua")
    table.sort(dirs)
    for _, d in ipairs(dirs) do
      mods[#mods + 1] = "lua/" .. pl_path.basename(d) .. "/"
    end
  end
  return mods
end

local modules -- the module groups, once made

--- The module groups, one per prefix, made once: by the handler at the
-- suite's start (with its --modules), by M.set, or by the first assertion
-- when perfmon.busted is a helper only (the defaults).
function M.modules(prefixes)
  if modules then return modules end
  modules = {}
  local cwd = require("pl.path").currentdir()
  for _, prefix in ipairs(prefixes or default_modules()) do
    local g = perfmon.group{ name = prefix, kind = "module" }
    modules[#modules + 1] = g
    perfmon.attach_source(prefix, g)
    if prefix:sub(1, 1) ~= "/" then
      -- require finds a module as ./lua/x.lua or /abs/lua/x.lua as often
      -- as lua/x.lua, by the search path that named it
      perfmon.attach_source("./" .. prefix, g)
      perfmon.attach_source(cwd .. "/" .. prefix, g)
    end
  end
  return modules
end

--- perfmon.busted.modules(prefixes): checks the prefixes and makes the
-- module groups by them.
function M.set(prefixes)
  if type(prefixes) ~= "table" then
    args.error(1, "perfmon.busted.modules", "table expected, got " .. type(prefixes))
  end
  local n = 0
  for i, p in ipairs(prefixes) do
    if type(p) ~= "string" or p == "" then
      args.error(1, "perfmon.busted.modules",
        ("prefixes expected: index %d is %s"):format(i, p == "" and "empty" or type(p)))
    end
    n = i
  end
  -- a misspelt field or a hole would drop prefixes silently
  for k in pairs(prefixes) do
    if math.type(k) ~= "integer" or k < 1 or k > n then
      args.error(1, "perfmon.busted.modules", ("unknown field %s (a list of prefixes)"):format(
        type(k) == "string" and ("%q"):format(k) or "[" .. tostring(k) .. "]"))
    end
  end
  return M.modules(prefixes)
end

--- The group of a spec file, named by its path as busted gives it: a
-- library group (docs/api.md, "Self time").  A spec file is the host of
-- its tests, as busted's code below it is: code it calls that belongs to a
-- group keeps its own self time (a library of the program's dispatching
-- on its own, a module), and a callback it hands a module is that
-- module's work.
function M.spec(path)
  local g = perfmon.group{ name = path, kind = "spec", library = true }
  perfmon.attach_source(path, g)
  return { group = g, path = path }
end

--- Lets a spec file's group die (its handle dropped, its source detached).
function M.drop_spec(spec)
  if spec then perfmon.detach_source(spec.path, spec.group) end
end

return module(M)
