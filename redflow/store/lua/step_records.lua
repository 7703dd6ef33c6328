-- Helper: write step records an attempt sent behind (engine/step_records.py):
-- the first-time steps it ran since its last call to Redis, which reach the
-- store with its next call (save_step's further records, or its settle).
-- The caller has checked the attempt's fence; records are written in order.
-- ``count`` records from ARGV[from]: step name, step JSON, blob field and
-- blob (the @blob: reference's value; "" "" for none) each.
local function save_records(run_key, steps_key, argv, from, count)
  local fields = {}
  for i = 0, count - 1 do
    local at = from + i * 4
    fields[#fields + 1] = argv[at]
    fields[#fields + 1] = argv[at + 1]
    if argv[at + 2] ~= "" then
      redis.call("hset", run_key .. ":blobs", argv[at + 2], argv[at + 3])
    end
  end
  redis.call("hset", steps_key, unpack(fields))
end
