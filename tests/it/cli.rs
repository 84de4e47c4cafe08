use std::process::Command;

use crate::support::drover_bin;

fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(drover_bin());
    cmd.args(args)
        .env_remove("DROVER_LISTEN")
        .env_remove("DROVER_STATE_DIR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run drover");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_explains_every_command() {
    let (code, stdout, _) = run(&["--help"], &[]);
    assert_eq!(code, Some(0));
    for command in ["serve", "check-config", "openapi"] {
        assert!(stdout.contains(command), "{stdout}");
    }
    let (code, stdout, _) = run(&["serve", "--help"], &[]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("--config") && stdout.contains("DROVER_LISTEN"),
        "{stdout}"
    );
}

#[test]
fn a_bad_config_stops_startup_with_key_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "state_dir: /tmp/x\nserver:\n  listen: 127.0.0.1:99999\n",
    )
    .unwrap();
    let (code, _, stderr) = run(&["serve", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("server.listen: invalid socket address \"127.0.0.1:99999\"")
            && stderr.contains("(line 3)"),
        "{stderr}"
    );

    std::fs::write(&path, "server:\n  listen: 127.0.0.1:0\nstorage: x\n").unwrap();
    let (code, _, stderr) = run(&["serve", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("unknown field `storage`") && stderr.contains("(line 3)"),
        "{stderr}"
    );

    let (code, _, stderr) = run(&["serve", "--config", "/nonexistent/drover.yaml"], &[]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("/nonexistent/drover.yaml: cannot read config"),
        "{stderr}"
    );

    let (code, _, stderr) = run(&["serve"], &[("DROVER_LISTEN", "localhost")]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("environment variable DROVER_LISTEN: invalid socket address \"localhost\""),
        "{stderr}"
    );
}

#[test]
fn check_config_accepts_every_example() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    for name in ["drover.yaml", "drover.full.yaml"] {
        let path = dir.join(name);
        let (code, stdout, stderr) =
            run(&["check-config", "--config", path.to_str().unwrap()], &[]);
        assert_eq!(code, Some(0), "{name}: {stderr}");
        assert!(stdout.starts_with("config OK"), "{stdout}");
    }
    let (code, stdout, _) = run(&["check-config"], &[("DROVER_LISTEN", "127.0.0.1:1234")]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("listen 127.0.0.1:1234"), "{stdout}");
}
