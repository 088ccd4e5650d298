use super::*;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pipe: (its read end, a queue writing to its write end, with its writer thread, and
/// the write end to keep open).
fn piped() -> (std::fs::File, &'static Queue, OwnedFd) {
    let (read, queue, write) = piped_without_writer();
    std::thread::spawn(|| queue.run_writer());
    (read, queue, write)
}

fn piped_without_writer() -> (std::fs::File, &'static Queue, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: a valid array of two descriptors, owned below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let queue: &'static Queue = Box::leak(Box::new(Queue::new(
        Output::open(write.as_raw_fd()),
        |dropped, line| line.extend_from_slice(format!("dropped {dropped}\n").as_bytes()),
    )));
    (std::fs::File::from(read), queue, write)
}

/// `line N` padded to 100 bytes, newline included.
fn numbered(n: usize) -> Vec<u8> {
    format!("line {n:<94}\n").into_bytes()
}

/// Reads from `pipe` until `done` holds for what was read, on a thread of its own (a
/// test's timeout ends it).
fn read_until(
    mut pipe: std::fs::File,
    done: impl Fn(&str) -> bool + Send + 'static,
) -> std::thread::JoinHandle<(std::fs::File, String)> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut buf = vec![0; 65536];
        while !done(&text) {
            let n = pipe.read(&mut buf).unwrap();
            assert!(n > 0, "the pipe closed; read so far:\n{text}");
            text.push_str(std::str::from_utf8(&buf[..n]).unwrap());
        }
        (pipe, text)
    })
}

#[test]
fn lines_go_out_whole_and_in_order_and_flush_waits_for_them() {
    let (pipe, queue, _keep) = piped();
    let reader = read_until(pipe, |t| t.len() >= 100_000);
    for n in 0..1000 {
        queue.push(&numbered(n), n == 500);
    }
    queue.flush(Duration::from_secs(30));
    let (_, text) = reader.join().unwrap();
    let want: String = (0..1000)
        .map(|n| String::from_utf8(numbered(n)).unwrap())
        .collect();
    assert_eq!(text, want);
    assert_eq!(queue.dropped(), 0);
}

/// The pipe nobody reads: every push returns, the lines that do not fit are counted, and
/// once the pipe is read again a line says how many were dropped, exactly where they
/// were: the numbers missing between the lines around it.
#[test]
fn a_full_output_drops_and_counts_lines_and_reports_each_gap_where_it_was() {
    let (pipe, queue, _keep) = piped();
    let pushed = 6000; // 600 KB: more than the pipe and the queue together
    for n in 0..pushed {
        queue.push(&numbered(n), false);
    }
    let dropped = queue.dropped();
    assert!(dropped > 0, "nothing was dropped");
    let reader = read_until(pipe, |t| t.ends_with("the end\n"));
    // Once what waits is out, the output takes lines again: this one is not dropped.
    queue.flush(Duration::from_secs(30));
    queue.push(b"the end\n", false);
    let (_, text) = reader.join().unwrap();
    assert_eq!(queue.dropped(), dropped);
    let (mut next, mut reported) = (0, 0);
    let mut gap: Option<u64> = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("dropped ") {
            assert!(gap.is_none(), "two reports in a row:\n{text}");
            gap = Some(n.parse().unwrap());
            continue;
        }
        let n = match line.strip_prefix("line ") {
            Some(n) => n.trim().parse::<usize>().unwrap(),
            None => pushed, // "the end"
        };
        let missing = (n - next) as u64;
        assert_eq!(gap.take().unwrap_or(0), missing, "before line {n}");
        reported += missing;
        next = n + 1;
    }
    assert_eq!(next, pushed + 1, "the last line is the end");
    assert_eq!(reported, dropped);
}

/// At exit, `flush` waits at most its bound for an output that takes nothing, then counts
/// what is left as dropped; after that nothing is written and every line is dropped.
#[test]
fn flush_gives_up_at_its_bound_and_counts_the_rest() {
    let (mut pipe, queue, _keep) = piped();
    let pushed = 3000; // 300 KB: the pipe fills, the rest waits or is dropped
    for n in 0..pushed {
        queue.push(&numbered(n), false);
    }
    let started = Instant::now();
    queue.flush(Duration::from_millis(300));
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    queue.push(&numbered(pushed), false);
    // Every line is either in the pipe or counted as dropped (a piece the writer had
    // under way as `flush` gave up may land in the pipe just after: waited for).
    let mut text = String::new();
    let mut buf = vec![0; 65536];
    let mut pipe_fd = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // SAFETY: one valid pollfd.
        while unsafe { libc::poll(&mut pipe_fd, 1, 20) } > 0 {
            let n = pipe.read(&mut buf).unwrap();
            text.push_str(std::str::from_utf8(&buf[..n]).unwrap());
        }
        let written = text.lines().count() as u64;
        if written + queue.dropped() == pushed as u64 + 1 {
            assert!(written > 0 && text.ends_with('\n'));
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{written} written, {} dropped, {} pushed",
            queue.dropped(),
            pushed + 1
        );
    }
}

/// The panic hook of a build that aborts writes what waits itself, whole lines, as much
/// as the output takes at once.
#[test]
fn what_waits_is_written_now_by_the_caller_as_far_as_the_output_takes_it() {
    let (mut pipe, queue, _keep) = piped_without_writer();
    for n in 0..3 {
        queue.push(&numbered(n), false);
    }
    queue.write_waiting_now();
    let mut buf = vec![0; 65536];
    let n = pipe.read(&mut buf).unwrap();
    let want: Vec<u8> = (0..3).flat_map(numbered).collect();
    assert_eq!(&buf[..n], &want[..]);
    // More than the pipe takes: what fits goes (about 64 KB), the rest is lost, never
    // waited for, and no line is cut.
    for n in 0..1000 {
        queue.push(&numbered(n), false);
    }
    queue.write_waiting_now();
    let mut text = Vec::new();
    let mut pipe_fd = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    while unsafe { libc::poll(&mut pipe_fd, 1, 0) } > 0 {
        let n = pipe.read(&mut buf).unwrap();
        text.extend_from_slice(&buf[..n]);
    }
    assert!(
        text.len() >= 60_000 && text.len() % 100 == 0,
        "{}",
        text.len()
    );
    let want: Vec<u8> = (0..text.len() / 100).flat_map(numbered).collect();
    assert_eq!(text, want);
}

#[test]
fn pieces_end_at_a_line_end_within_the_bound() {
    assert_eq!(whole_lines(b"ab\ncd\nef\n", 100), 9);
    assert_eq!(whole_lines(b"ab\ncd\nef\n", 7), 6);
    assert_eq!(whole_lines(b"ab\ncd\nef\n", 3), 3);
    assert_eq!(
        whole_lines(b"abcdef\ng\n", 3),
        7,
        "a longer line goes alone"
    );
    assert_eq!(whole_lines(b"abcdef", 3), 6);
}
