-- GET with the bench company's API key (BENCH_KEY).
package.path = os.getenv("BENCH_LUA_DIR") .. "/?.lua;" .. package.path
local report = require("report")

wrk.method = "GET"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_KEY")

done = report.done
