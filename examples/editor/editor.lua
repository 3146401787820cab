--- editor: a small editor host, perfmon's reference host in Lua.
--
-- It loads every plugin of a folder into a sandbox of its own, in a
-- performance group of its own; replays a scripted session (keystrokes,
-- cursor moves, saves) through its event loop, one perfmon event per input;
-- prints the plugin watcher's warnings as they come; and ends with an
-- about:performance-style table of the plugins, busiest first.
--
-- examples/editor/main.lua runs it (tools/run demo); examples/editor_host.c
-- is the same host written in C, on the same plugins and session.
--
-- What a plugin sees: the globals of a small sandbox (string, table, math,
-- utf8, coroutine, os.clock and the basic functions; no io, no os.execute,
-- no require) and `editor`:
--   editor.on_key(fn)      fn(key) after each keystroke ("\n", "\b" or a
--                          character)
--   editor.on_cursor(fn)   fn(line, col) after each cursor move
--   editor.on_save(fn)     fn(path) after the document was saved
--   editor.text()          the whole document
--   editor.line(n)         line n, without its newline (nil past the end)
--   editor.cursor()        line, col (col is a byte column, 1 is the start)
--   editor.backup(text)    copies text to the backup store: a synchronous
--                          write to a slow remote drive (~100 ms), declared
--                          to perfmon as a blocking call
--   editor.status(text)    the plugin's part of the status bar

local perfmon = require("perfmon")
local watcher = require("perfmon.watcher")
local PluginWatcher = require("perfmon.plugin_watcher")
local buckets = require("perfmon.buckets")
local wall_us = require("perfmon.core").wall_us

local M = {}

local Editor = {}
Editor.__index = Editor

M.BACKUP_LATENCY_MS = 100

-- depth: the functions between the check and the caller to blame (1 when
-- called from the function that was called with the bad argument).
local function arg_error(n, fname, msg, depth)
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, msg), (depth or 1) + 2)
end

local function check_arg(n, fname, v, want)
  if type(v) ~= want then arg_error(n, fname, want .. " expected, got " .. type(v), 2) end
end
M.KINDS = { "key", "cursor", "save" } -- the handlers a plugin may register

----------------------------------------------------------------------------
-- The session
----------------------------------------------------------------------------

--- The inputs of a session (see session.lua), one per event:
-- { kind = "key", key = k } | { kind = "cursor", line = l, col = c } |
-- { kind = "save" }.
function M.inputs(session)
  check_arg(1, "inputs", session, "table")
  local inputs = {}
  local function add(input) inputs[#inputs + 1] = input end
  for i, step in ipairs(session) do
    local what = type(step) == "table" and step[1]
    local function bad(expected)
      error(("session step %d: %s"):format(i, expected), 3)
    end
    if what == "type" then
      if type(step[2]) ~= "string" then bad("type expects a string") end
      for c in step[2]:gmatch(".") do add { kind = "key", key = c } end
    elseif what == "key" then
      if type(step[2]) ~= "string" or #step[2] ~= 1 then bad("key expects one character") end
      add { kind = "key", key = step[2] }
    elseif what == "move" then
      if math.type(step[2]) ~= "integer" or math.type(step[3]) ~= "integer" then
        bad("move expects a line and a column (integers)")
      end
      add { kind = "cursor", line = step[2], col = step[3] }
    elseif what == "save" then
      add { kind = "save" }
    else
      bad(("unknown step %q (type, key, move or save expected)"):format(tostring(what)))
    end
  end
  return inputs
end

----------------------------------------------------------------------------
-- The buffer: a list of lines and a cursor
----------------------------------------------------------------------------

function Editor:insert(key)
  local line = self.lines[self.line]
  local before, after = line:sub(1, self.col - 1), line:sub(self.col)
  if key == "\n" then
    self.lines[self.line] = before
    table.insert(self.lines, self.line + 1, after)
    self.line, self.col = self.line + 1, 1
  elseif key == "\b" then
    if self.col > 1 then
      self.lines[self.line] = before:sub(1, -2) .. after
      self.col = self.col - 1
    elseif self.line > 1 then
      local prev = self.lines[self.line - 1]
      self.lines[self.line - 1] = prev .. line
      table.remove(self.lines, self.line)
      self.line, self.col = self.line - 1, #prev + 1
    end
  else
    self.lines[self.line] = before .. key .. after
    self.col = self.col + 1
  end
end

-- Like a real editor, a move past the end of a line or of the document
-- stops at it.
function Editor:move(line, col)
  self.line = math.max(1, math.min(line, #self.lines))
  self.col = math.max(1, math.min(col, #self.lines[self.line] + 1))
end

function Editor:text()
  return table.concat(self.lines, "\n")
end

----------------------------------------------------------------------------
-- Plugins: sandboxes, groups, the `editor` API
----------------------------------------------------------------------------

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- A fresh sandbox: copies of the safe libraries, so that a plugin that
-- patches string.format patches only its own.
local function sandbox(api)
  local env = {
    editor = api, string = copy(string), table = copy(table),
    math = copy(math), utf8 = copy(utf8), coroutine = copy(coroutine),
    os = { clock = os.clock, time = os.time, date = os.date },
  }
  for _, name in ipairs { "assert", "error", "ipairs", "next", "pairs",
    "pcall", "rawequal", "rawget", "rawlen", "rawset", "select",
    "setmetatable", "getmetatable", "tonumber", "tostring", "type",
    "xpcall" } do
    env[name] = _G[name]
  end
  env._G = env
  return env
end

local function sleep(ms)
  -- the host is not sandboxed; a real editor would wait on a socket
  os.execute(("sleep %.3f"):format(ms / 1000))
end

-- The `editor` table of plugin p: its functions are the host's, and run
-- charged to whichever plugin calls them.
function Editor:api(p)
  local api = {}
  for _, kind in ipairs(M.KINDS) do
    local fname = "on_" .. kind
    api[fname] = function(fn)
      if type(fn) ~= "function" then
        error(("bad argument #1 to '%s' (function expected, got %s)")
          :format(fname, type(fn)), 2)
      end
      table.insert(p.handlers[kind], fn)
    end
  end
  function api.text() return self:text() end
  function api.line(n)
    if math.type(n) ~= "integer" then
      error("bad argument #1 to 'line' (integer expected, got "
        .. (math.type(n) or type(n)) .. ")", 2)
    end
    return self.lines[n]
  end
  function api.cursor() return self.line, self.col end
  function api.status(text)
    if type(text) ~= "string" then
      error("bad argument #1 to 'status' (string expected, got " .. type(text) .. ")", 2)
    end
    p.status = text
  end
  function api.backup(text)
    if type(text) ~= "string" then
      error("bad argument #1 to 'backup' (string expected, got " .. type(text) .. ")", 2)
    end
    local w0 = wall_us()
    perfmon.blocking(function()
      local f = assert(io.open(self.path .. ".bak", "w"))
      f:write(text)
      f:close()
      sleep(self.backup_latency_ms) -- the remote drive's latency
    end)
    p.backups, p.backup_us = p.backups + 1, p.backup_us + (wall_us() - w0)
  end
  return api
end

--- Loads the plugin in file path, named name, into a sandbox and a group
-- of its own.  Returns the plugin, or nil and the error.
function Editor:load_plugin(path, name)
  check_arg(1, "load_plugin", path, "string")
  check_arg(2, "load_plugin", name, "string")
  local group = perfmon.group { name = name, kind = "plugin" }
  local p = {
    name = name, group = group, status = "", handlers = {},
    -- the ground truth: what the host measures around each call
    cpu_s = 0, calls = 0, errors = 0, backups = 0, backup_us = 0,
  }
  for _, kind in ipairs(M.KINDS) do p.handlers[kind] = {} end
  local env = sandbox(self:api(p))
  local main, err = perfmon.loadfile(path, env, group)
  if not main then return nil, err end
  local ok, err2 = pcall(main)
  if not ok then return nil, err2 end
  self.plugins[#self.plugins + 1] = p
  return p
end

--- The *.lua files of dir, in name order.
function M.plugin_files(dir)
  local quoted = "'" .. dir:gsub("'", "'\\''") .. "'"
  local ls = assert(io.popen("ls -1 " .. quoted .. " 2>/dev/null"))
  local files = {}
  for name in ls:lines() do
    if name:match("%.lua$") then files[#files + 1] = name end
  end
  ls:close()
  table.sort(files)
  return files
end

--- Loads every plugin of dir; a plugin that fails to load is reported and
-- left out.
function Editor:load_plugins(dir)
  check_arg(1, "load_plugins", dir, "string")
  for _, file in ipairs(M.plugin_files(dir)) do
    local name = file:gsub("%.lua$", "")
    local p, err = self:load_plugin(dir .. "/" .. file, name)
    if not p then self:say("editor: plugin %s not loaded: %s", name, err) end
  end
  if #self.plugins == 0 then error("no plugins in " .. dir, 2) end
end

----------------------------------------------------------------------------
-- The event loop
----------------------------------------------------------------------------

function Editor:say(fmt, ...)
  self.out(fmt:format(...) .. "\n")
end

-- Calls the handlers of one kind, each plugin's in protected mode (a
-- failing plugin never takes the editor down), measuring each call.
function Editor:notify(kind, ...)
  for _, p in ipairs(self.plugins) do
    local spent = 0
    for _, fn in ipairs(p.handlers[kind]) do
      local t0 = os.clock()
      local ok, err = pcall(fn, ...)
      spent = spent + (os.clock() - t0)
      p.calls = p.calls + 1
      if not ok then
        p.errors = p.errors + 1
        self:say("editor: plugin %s failed: %s", p.name, tostring(err))
      end
    end
    p.cpu_s = p.cpu_s + spent
    p.longest_s = math.max(p.longest_s or 0, spent)
  end
end

function Editor:save()
  -- the document itself goes to the local disk: quick, but a disk write
  -- all the same, charged to the process (no plugin runs)
  perfmon.blocking(function()
    local f = assert(io.open(self.path, "w"))
    f:write(self:text(), "\n")
    f:close()
  end)
  self.saves = self.saves + 1
end

-- One iteration of the loop: the input, then the plugins' handlers.
function Editor:handle(input)
  perfmon.user_input()
  if input.kind == "key" then
    self:insert(input.key)
    self:notify("key", input.key)
  elseif input.kind == "cursor" then
    self:move(input.line, input.col)
    self:notify("cursor", self.line, self.col)
  else
    self:save()
    self:notify("save", self.path)
  end
end

--- Replays inputs through the event loop; returns the report (see
-- Editor:report).
function Editor:replay(inputs)
  check_arg(1, "replay", inputs, "table")
  local before = self.monitor:snapshot()
  for i, input in ipairs(inputs) do
    self.when = ("input %d/%d"):format(i, #inputs)
    perfmon.event(self.handle, self, input)
    -- the idle step: deliver the alerts whose buffering delay has passed
    watcher.poll()
  end
  -- the end of the session: alerts raised by the last events may still be
  -- buffered; deliver them now, so that none is lost
  self.when = "after the session"
  watcher.flush()
  return self:report(self.monitor:snapshot():subtract(before), inputs)
end

----------------------------------------------------------------------------
-- The report
----------------------------------------------------------------------------

--- The rows of the table: each plugin's perfmon stats (cpu_us, ticks,
-- blocking_us, durations, longest), with share = its percentage of the
-- process's CPU time and truth = what the host measured; busiest first.
function Editor:report(d, inputs)
  local rows = {}
  local total = math.max(d.process.cpu_us, 1)
  for _, p in ipairs(self.plugins) do
    local st = d.groups[p.group.id]
    st.share = 100 * st.cpu_us / total
    st.truth = { cpu_us = p.cpu_s * 1e6, calls = p.calls, errors = p.errors,
      backups = p.backups, backup_us = p.backup_us, longest_us = (p.longest_s or 0) * 1e6 }
    rows[#rows + 1] = st
  end
  table.sort(rows, function(a, b)
    if a.cpu_us ~= b.cpu_us then return a.cpu_us > b.cpu_us end
    return a.name < b.name
  end)
  local counts = { key = 0, cursor = 0, save = 0 }
  for _, input in ipairs(inputs) do counts[input.kind] = counts[input.kind] + 1 end
  d.process.share = 100
  return { delta = d, rows = rows, process = d.process, inputs = counts,
    events = #inputs, warnings = self.warnings, saves = self.saves }
end


local ROW = "%-16s %9.1f %6.1f%% %6d %11.1f %9.1f  %-10s %s"
local HEAD = "%-16s %9s %7s %6s %11s %9s  %-10s %s"

--- Prints the about:performance-style table of report r.
function Editor:print_table(r)
  self:say("")
  self:say("about:performance -- %d events (%d keystrokes, %d cursor moves, %d saves), "
    .. "%.2f s of wall time, %.0f ms of CPU", r.events, r.inputs.key, r.inputs.cursor,
    r.inputs.save, r.delta.time / 1e6, r.process.cpu_us / 1000)
  self:say(HEAD, "plugin", "cpu ms", "share", "ticks", "blocking ms", "alloc KB", "longest",
    "jank histogram (ms:events)")
  for _, st in ipairs(r.rows) do
    self:say(ROW, st.name, st.cpu_us / 1000, st.share, st.ticks, st.blocking_us / 1000,
      st.alloc_bytes / 1024, buckets.name(st.longest), buckets.histogram(st.durations))
  end
  local p = r.process
  self:say(ROW, "(whole editor)", p.cpu_us / 1000, p.share, p.ticks, p.blocking_us / 1000,
    p.alloc_bytes / 1024, buckets.name(p.longest), buckets.histogram(p.durations))
end

----------------------------------------------------------------------------
-- Making and running an editor
----------------------------------------------------------------------------

--- A new editor.  opts (all optional): out = function(text) that prints
-- (default io.write), path = where saves go (default a temporary file),
-- backup_latency_ms, watcher = options for the plugin watcher.
function M.new(opts)
  opts = opts or {}
  check_arg(1, "new", opts, "table")
  for key, want in pairs { out = "function", path = "string", backup_latency_ms = "number",
    watcher = "table", dir = "string" } do
    if opts[key] ~= nil and type(opts[key]) ~= want then
      arg_error(1, "new", ("'%s' must be a %s, got %s"):format(key, want, type(opts[key])))
    end
  end
  local self = setmetatable({
    out = opts.out or io.write,
    path = opts.path or os.tmpname(),
    temporary = opts.path == nil,
    backup_latency_ms = opts.backup_latency_ms or M.BACKUP_LATENCY_MS,
    lines = { "" }, line = 1, col = 1, saves = 0, when = "start",
    plugins = {}, warnings = {},
  }, Editor)
  -- open before the plugins' main chunks run, so that they are measured too
  self.monitor = perfmon.monitor { "jank", "blocking", "ticks", "memory" }
  local wopts = copy(opts.watcher or {})
  wopts.on_warning = function(w)
    self.warnings[#self.warnings + 1] = w
    self:say("[%s] perfmon: %s", self.when, w.message)
  end
  self.plugin_watcher = PluginWatcher.new(wopts)
  return self
end

--- The status bar: each plugin's status, in load order.
function Editor:status_bar()
  local parts = {}
  for _, p in ipairs(self.plugins) do
    if p.status ~= "" then parts[#parts + 1] = p.status end
  end
  return table.concat(parts, " | ")
end

function Editor:close()
  if self.closed then return end
  self.closed = true
  self.plugin_watcher:close()
  self.monitor:close()
  if self.temporary then
    os.remove(self.path)
    os.remove(self.path .. ".bak")
  end
end

Editor.__close = Editor.close

--- The demo: loads the plugins of dir/plugins, replays dir/session.lua,
-- prints the warnings, the status bar and the table.  opts as for new,
-- plus dir (default: this file's folder).  Returns the report.
function M.main(opts)
  opts = opts or {}
  check_arg(1, "main", opts, "table")
  local dir = opts.dir or (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  local ed <close> = M.new(opts)
  ed:load_plugins(dir .. "/plugins")
  local names = {}
  for _, p in ipairs(ed.plugins) do names[#names + 1] = p.name end
  local inputs = M.inputs(dofile(dir .. "/session.lua"))
  ed:say("editor: %d plugins (%s), each in its own sandbox and group; replaying %d inputs",
    #ed.plugins, table.concat(names, ", "), #inputs)
  local r = ed:replay(inputs)
  ed:say("editor: session over, document saved %d times; status bar: %s",
    r.saves, ed:status_bar())
  ed:print_table(r)
  return r
end

return M
