//! linkem: an emulated distant link between two network namespaces, for the live-migration
//! benchmark and its test. This kernel has no `sch_netem` (so `tc qdisc ... netem` is
//! refused), so the link is emulated here, at the packet level: one TUN device in each
//! namespace, and every IP packet read from one is written to the other after it has been
//! serialized at the link's rate (behind the packets before it) and has crossed the one-way
//! delay. A packet that would wait longer than the queue allows is dropped (tail drop), as a
//! router's queue would. TCP on both sides sees a real round-trip time and a real bottleneck.
//!
//! ```text
//! linkem NS_A NS_B DELAY_MS RATE_MBIT [QUEUE_KB]
//! ```
//!
//! Creates `lm0` in each namespace (`/var/run/netns/NS_A`, `.../NS_B`; made with
//! `ip netns add`), prints `ready`, and forwards until killed; the devices go with it. The
//! caller gives them addresses and brings them up. Needs root (or CAP_NET_ADMIN).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Opens a TUN device named `lm0` in namespace `ns`.
fn tun_in(ns: &str) -> std::io::Result<File> {
    let netns = File::open(format!("/var/run/netns/{ns}"))?;
    // Only this thread moves; the device belongs to the namespace it is created in, and the
    // descriptor keeps working wherever the thread goes next.
    if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let tun = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    let mut req = IfReq {
        name: [0; 16],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    req.name[..3].copy_from_slice(b"lm0");
    if unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETIFF as _, &mut req) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(tun)
}

/// One direction of the link: packets from `from` reach `to` after the queue and the delay.
fn direction(mut from: File, mut to: File, delay: Duration, bytes_per_sec: f64, queue: f64) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut failing_since = None;
        for (at, packet) in rx {
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            // A device that is not up yet refuses packets (EIO): the first packets of the
            // side brought up first (IPv6 solicitations) reach the other before its caller
            // has brought it up. Such a packet is lost, as on a cable to a port that is
            // down; ending here, as this did until 2026-12-03, left the link dead one way
            // (a test on a loaded machine then waited 133 s for a connection). Only a device
            // refusing everything for a long while (its namespace gone) ends the link.
            match to.write_all(&packet) {
                Ok(()) => failing_since = None,
                Err(_) if gone(&mut failing_since) => return,
                Err(_) => {}
            }
        }
    });
    let mut busy_until = Instant::now();
    let mut buf = vec![0u8; 65_536];
    let mut failing_since = None;
    loop {
        let n = match from.read(&mut buf) {
            Ok(n) => {
                failing_since = None;
                n
            }
            Err(_) if gone(&mut failing_since) => return,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let now = Instant::now();
        let start = busy_until.max(now);
        // Tail drop: the queue ahead of this packet is longer than the router holds.
        if (start - now).as_secs_f64() * bytes_per_sec > queue {
            continue;
        }
        busy_until = start + Duration::from_secs_f64(n as f64 / bytes_per_sec);
        if tx.send((busy_until + delay, buf[..n].to_vec())).is_err() {
            return;
        }
    }
}

/// Whether a device has failed every read or write for [`GONE_AFTER`], counting from the
/// first failure of the current run of them (kept in `since`).
fn gone(since: &mut Option<Instant>) -> bool {
    since.get_or_insert_with(Instant::now).elapsed() >= GONE_AFTER
}

/// How long a device may refuse packets before the link gives up on it.
const GONE_AFTER: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: linkem NS_A NS_B DELAY_MS RATE_MBIT [QUEUE_KB]");
        std::process::exit(2);
    }
    let number = |i: usize, what: &str| -> f64 {
        args[i].parse().unwrap_or_else(|_| {
            eprintln!("linkem: {what} {:?} is not a number", args[i]);
            std::process::exit(2)
        })
    };
    let delay = Duration::from_secs_f64(number(2, "DELAY_MS") / 1000.0);
    let bytes_per_sec = number(3, "RATE_MBIT") * 1e6 / 8.0;
    // By default a queue of twice the bandwidth-delay product (at least 1 MiB).
    let queue = if args.len() > 4 {
        number(4, "QUEUE_KB") * 1024.0
    } else {
        (2.0 * 2.0 * delay.as_secs_f64() * bytes_per_sec).max(1048576.0)
    };
    let open = |ns: &str| {
        tun_in(ns).unwrap_or_else(|e| {
            eprintln!("linkem: a TUN device in namespace {ns}: {e}");
            std::process::exit(1)
        })
    };
    let a = open(&args[0]);
    let b = open(&args[1]);
    let (a2, b2) = (a.try_clone().expect("dup"), b.try_clone().expect("dup"));
    std::thread::spawn(move || direction(a, b2, delay, bytes_per_sec, queue));
    println!("ready");
    direction(b, a2, delay, bytes_per_sec, queue);
}
