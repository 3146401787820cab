-- notes: a cheap plugin for tests/host.c.
--
-- Every event it counts the words of a short note, which costs a few
-- microseconds.  Twice in the run it calls into the host: host.save() is a
-- blocking call (the host sleeps ~20 ms, declared to perfmon), and
-- host.confirm() shows a "modal dialog", which spins a nested event loop in
-- the host (the other plugin keeps running in it).  It does nothing after
-- confirm() returns: perfmon does not charge a frame that ran across a
-- nested loop for the rest of it, so there would be nothing to compare.

local note = "the quick brown fox jumps over the lazy dog"
local counts = {}
local words = 0

local function count_words(text)
  local n = 0
  for w in text:gmatch("%a+") do
    counts[w] = (counts[w] or 0) + 1
    n = n + 1
  end
  return n
end

function on_event(i)
  words = words + count_words(note)
  if i == host.save_at then
    host.save(note, words)
  elseif i == host.confirm_at then
    return host.confirm("discard the note?")
  end
  return words
end
