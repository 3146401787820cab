--- perfmon.flamegraph: a saved Gecko profile as an SVG flame graph.
--
-- For people without a browser at hand (tools/flamegraph is the command).
-- Each box is a stack: its width is the samples with that stack (or one
-- that continues it), callers below, callees above, siblings sorted by
-- name as in Brendan Gregg's flame graphs; its colour is the category of
-- its frame, which perfmon sets to the function's performance group.  Each
-- sampled thread (the main thread, each coroutine) is a tower of its own
-- on the root.

local flamegraph = {}

-- The front end's category colours, near enough.
local PALETTE = {
  grey = "#b2b2b6", yellow = "#ffe900", orange = "#ff9400", blue = "#45a1ff",
  green = "#30e60b", purple = "#c069ff", red = "#ff4f5e", lightblue = "#80ebff",
  brown = "#d3a877", magenta = "#ff6bd6", transparent = "#e0e0e0",
}

local module = require("perfmon.module")
local arg_error = require("perfmon.args").error
local text_utf8 = require("perfmon.text").utf8

-- XML text: UTF-8, and without the control characters XML 1.0 forbids
-- (all but tab, newline and return), which a name may hold.
local function xml(s)
  s = text_utf8(tostring(s)):gsub("[\0-\8\11\12\14-\31]", "\u{FFFD}")
  return (s:gsub("[<>&\"']", { ["<"] = "&lt;", [">"] = "&gt;", ["&"] = "&amp;",
                               ['"'] = "&quot;", ["'"] = "&apos;" }))
end

-- s shortened to fit `chars` characters, cut between characters.
local function fit(s, chars)
  s = text_utf8(s)
  if utf8.len(s) <= chars then return s end
  return s:sub(1, utf8.offset(s, chars - 1) - 1) .. ".."
end

local function node(name, color)
  return { name = name, color = color, count = 0, children = {}, order = {} }
end

local function child(parent, name, color)
  local c = parent.children[name]
  if not c then
    c = node(name, color)
    parent.children[name] = c
    parent.order[#parent.order + 1] = c
  end
  return c
end

local function check_profile(profile, fname)
  if type(profile) ~= "table" then
    arg_error(1, fname, "decoded Gecko profile (a table) expected, got " .. type(profile), 2)
  end
end

--- The tree of a decoded Gecko profile: { name, count, children, order }.
function flamegraph.tree(profile)
  check_profile(profile, "perfmon.flamegraph.tree")
  local cats = profile.meta and profile.meta.categories or {}
  local root = node("all", PALETTE.transparent)
  for _, th in ipairs(profile.threads or {}) do
    local strings = th.stringTable
    local fcol = th.frameTable.schema
    local scol = th.stackTable.schema
    local frames, stacks = th.frameTable.data, th.stackTable.data
    local top = child(root, th.name or "thread", PALETTE.transparent)
    local path_of = {} -- [stack index] = list of { label, colour }, root first
    local function path(i)
      local p = path_of[i]
      if p then return p end
      local row = stacks[i + 1]
      local prefix = row[scol.prefix + 1]
      local frame = frames[row[scol.frame + 1] + 1]
      local label = strings[frame[fcol.location + 1] + 1]
      label = label:gsub(":(%d+):0%)$", ":%1)") -- "name (file:line)"
      local cat = cats[(tonumber(frame[fcol.category + 1]) or 0) + 1]
      local color = PALETTE[cat and cat.color or "grey"] or PALETTE.grey
      p = {}
      if type(prefix) == "number" then
        for k, v in ipairs(path(prefix)) do p[k] = v end
      end
      p[#p + 1] = { label, color }
      path_of[i] = p
      return p
    end
    local scol_stack = th.samples.schema.stack + 1
    for _, sample in ipairs(th.samples.data) do
      local s = sample[scol_stack]
      if type(s) == "number" then
        root.count = root.count + 1
        top.count = top.count + 1
        local n = top
        for _, f in ipairs(path(s)) do
          n = child(n, f[1], f[2])
          n.count = n.count + 1
        end
      end
    end
  end
  return root
end

--- The SVG text of a decoded Gecko profile.  opts: width (px, 1200),
-- title.
function flamegraph.svg(profile, opts)
  check_profile(profile, "perfmon.flamegraph.svg")
  opts = opts == nil and {} or opts
  if type(opts) ~= "table" then
    arg_error(2, "perfmon.flamegraph.svg", "options table expected, got " .. type(opts))
  end
  for k in pairs(opts) do
    if k ~= "width" and k ~= "title" then
      arg_error(2, "perfmon.flamegraph.svg", ("unknown option %s (options: width, title)"):format(
        type(k) == "string" and ("%q"):format(k) or ("[" .. tostring(k) .. "]")))
    end
  end
  local width = opts.width or 1200
  if not math.type(width) or not math.tointeger(width) or width < 100 then
    arg_error(2, "perfmon.flamegraph.svg", "width: an integer number of px >= 100 expected, got "
      .. (type(width) == "number" and tostring(width) or type(width)))
  end
  if opts.title ~= nil and type(opts.title) ~= "string" then
    arg_error(2, "perfmon.flamegraph.svg", "title: string expected, got " .. type(opts.title))
  end
  local row, pad, top_pad = 17, 10, 40
  local root = flamegraph.tree(profile)
  local depth = 0
  local function measure(n, d)
    if d > depth then depth = d end
    for _, c in ipairs(n.order) do measure(c, d + 1) end
  end
  measure(root, 0)
  local height = top_pad + (depth + 1) * row + pad * 2
  local out = {}
  local function emit(s) out[#out + 1] = s end
  emit('<?xml version="1.0" standalone="no"?>\n')
  emit(('<svg version="1.1" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg" ' ..
        'font-family="Verdana, sans-serif" font-size="12">\n'):format(width, height))
  emit(('<rect x="0" y="0" width="%d" height="%d" fill="#f8f8f8"/>\n'):format(width, height))
  emit(('<text x="%d" y="24" font-size="17" text-anchor="middle">%s</text>\n')
    :format(width // 2, xml(opts.title or "perfmon flame graph")))
  local scale = root.count > 0 and (width - 2 * pad) / root.count or 0
  local function draw(n, x, d)
    local w = n.count * scale
    if w < 0.3 then return end
    local y = height - pad - (d + 1) * row
    local pct = root.count > 0 and 100 * n.count / root.count or 0
    emit(('<g><title>%s (%d samples, %.2f%%)</title>'):format(xml(n.name), n.count, pct))
    emit(('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" rx="2" ry="2"/>')
      :format(x, y, w, row - 1, n.color))
    local chars = math.floor((w - 6) / 7)
    if chars >= 3 then
      emit(('<text x="%.2f" y="%d">%s</text>'):format(x + 3, y + row - 5, xml(fit(n.name, chars))))
    end
    emit("</g>\n")
    table.sort(n.order, function(a, b) return a.name < b.name end)
    local cx = x
    for _, c in ipairs(n.order) do
      draw(c, cx, d + 1)
      cx = cx + c.count * scale
    end
  end
  if root.count > 0 then
    draw(root, pad, 0)
  else
    emit(('<text x="%d" y="%d" text-anchor="middle">no samples</text>\n'):format(width // 2, height // 2))
  end
  emit("</svg>\n")
  return table.concat(out)
end

local USAGE = [[
usage: tools/flamegraph PROFILE.json [OUT.svg] [--width PX] [--title TEXT]
  Reads a Gecko profile saved by perfmon (profiler:save(path), or the text of
  profiler:to_gecko()) and writes an SVG flame graph: to OUT.svg, or to
  PROFILE.svg next to the input when OUT.svg is not given; "-" writes it to
  standard output.  Open the SVG in any image viewer or browser.]]

--- The command: flamegraph.main(arg) -> exit status.
function flamegraph.main(argv)
  if type(argv) ~= "table" then
    arg_error(1, "perfmon.flamegraph.main", "list of arguments expected, got " .. type(argv))
  end
  for i = 1, #argv do
    if type(argv[i]) ~= "string" then
      arg_error(1, "perfmon.flamegraph.main", ("list of strings expected, its [%d] is a %s")
        :format(i, type(argv[i])))
    end
  end
  local input, output, opts = nil, nil, {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "-h" or a == "--help" then
      print(USAGE)
      return 0
    elseif a == "--width" then
      opts.width = math.tointeger(tonumber(argv[i + 1]))
      if not opts.width or opts.width < 100 then
        io.stderr:write("flamegraph: --width needs a whole number of pixels >= 100\n", USAGE, "\n")
        return 2
      end
      i = i + 1
    elseif a == "--title" then
      opts.title = argv[i + 1]
      i = i + 1
    elseif not input then
      input = a
    elseif not output then
      output = a
    else
      io.stderr:write("flamegraph: unexpected argument: ", a, "\n", USAGE, "\n")
      return 2
    end
    i = i + 1
  end
  if not input then
    io.stderr:write(USAGE, "\n")
    return 2
  end
  local f, err = io.open(input, "r")
  if not f then
    io.stderr:write("flamegraph: ", err, "\n")
    return 1
  end
  local text = f:read("a")
  f:close()
  local ok, profile = pcall(require("cjson").decode, text)
  if not ok or type(profile) ~= "table" or type(profile.threads) ~= "table" then
    io.stderr:write("flamegraph: ", input, " is not a Gecko profile (",
      ok and "no threads" or tostring(profile), ")\n")
    return 1
  end
  opts.title = opts.title or ("perfmon: " .. input:match("[^/]*$"))
  local svg = flamegraph.svg(profile, opts)
  output = output or (input:gsub("%.json$", "") .. ".svg")
  if output == "-" then
    io.write(svg)
  else
    local o, werr = io.open(output, "w")
    if not o then
      io.stderr:write("flamegraph: ", werr, "\n")
      return 1
    end
    o:write(svg)
    o:close()
    io.stderr:write("flamegraph: wrote ", output, "\n")
  end
  return 0
end

return module(flamegraph)
