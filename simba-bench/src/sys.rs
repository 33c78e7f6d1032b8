//! This process's CPU time and resident memory (Linux `/proc`).

/// CPU time (user + system, all threads, dead ones included) of this
/// process in seconds, from `/proc/self/stat` (clock-tick resolution,
/// usually 10 ms); `None` off Linux.
pub fn cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at ") ".
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 here.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_second())
}

fn ticks_per_second() -> f64 {
    // USER_HZ is 100 on every Linux architecture Simba targets.
    100.0
}

/// Resident set size of this process in bytes (`VmRSS`); `None` off Linux.
pub fn rss_bytes() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// How this machine's CPUs idle (Linux `cpuidle`), for the results'
/// header: the idle driver and, for `haltpoll`, how long an idle virtual
/// CPU polls before it halts. Latencies after an idle pause (a hand-over)
/// depend on it: a CPU that halts at once is woken through the hypervisor.
/// `None` where `/sys` does not say.
///
/// ```
/// if let Some(idle) = simba_bench::sys::cpu_idle() {
///     assert!(idle.starts_with("CPU idle driver"));
/// }
/// ```
pub fn cpu_idle() -> Option<String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let driver = read("/sys/devices/system/cpu/cpuidle/current_driver")?;
    Some(
        match read("/sys/module/haltpoll/parameters/guest_halt_poll_ns") {
            Some(ns) if driver == "haltpoll" => {
                format!("CPU idle driver `{driver}`, guest_halt_poll_ns = {ns}")
            }
            _ => format!("CPU idle driver `{driver}`"),
        },
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_process() {
        if cfg!(target_os = "linux") {
            assert!(super::cpu_secs().is_some());
            assert!(super::rss_bytes().is_some_and(|b| b > 0.0));
        }
    }
}
