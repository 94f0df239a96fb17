//! CPU time from `/proc`, for the benchmarks that say where a cost lies:
//! a process's own (and its waited-for children's), every `postgres`
//! process's, and the whole machine's, in clock ticks ([`TICK_HZ`] a
//! second). Shared by the benchmarks through `#[path]`.

/// Clock ticks per second (`getconf CLK_TCK`, asked once; 100 on Linux
/// where it fails).
pub static TICK_HZ: std::sync::LazyLock<f64> = std::sync::LazyLock::new(|| {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
});

/// Ticks as seconds.
pub fn seconds(ticks: u64) -> f64 {
    ticks as f64 / *TICK_HZ
}

/// (utime + stime, cutime + cstime) of a process, from `/proc/PID/stat`:
/// after the command name (which may hold spaces) they are the 12th to
/// 15th fields; the second pair counts the children it waited for.
fn process_ticks(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    (fields.len() == 4).then(|| (fields[0] + fields[1], fields[2] + fields[3]))
}

/// This process's own ticks and its ended children's.
pub fn this_process() -> (u64, u64) {
    process_ticks(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap()
}

/// Process `pid`'s own ticks (0 once it is gone).
pub fn process(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| process_ticks(&stat))
        .map_or(0, |(own, _)| own)
}

/// The ticks of every `postgres` process alive: the backends and the
/// background ones a write wakes.
pub fn postgres() -> u64 {
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = entry.path();
        let is_pg =
            std::fs::read_to_string(path.join("comm")).is_ok_and(|c| c.trim_end() == "postgres");
        if is_pg && let Ok(stat) = std::fs::read_to_string(path.join("stat")) {
            ticks += process_ticks(&stat).map_or(0, |(own, _)| own);
        }
    }
    ticks
}

/// The whole machine's busy ticks: the first line of /proc/stat (user nice
/// system idle iowait irq softirq steal) less idle and iowait.
pub fn machine() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().unwrap())
        .collect();
    ticks.iter().sum::<u64>() - ticks[3] - ticks[4]
}
