//! One-time setup of the Python clients (kafka-python and confluent-kafka in
//! `target/interop-venv`, pinned by `tests/interop/requirements.txt`) and kcat,
//! as `.ci/run` does; missing pieces are installed (apt-get as root).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::paths::{scripts_dir, workspace};
use super::process::{run, run_ok, SETUP_TIMEOUT};

/// Pinned client versions, shared with `.ci/run`.
const REQUIREMENTS: &str = include_str!("../../../interop/requirements.txt");

/// The interop virtualenv's interpreter, with kafka-python and confluent-kafka
/// at the pinned versions, set up on first use.
///
/// # Panics
///
/// If the setup is impossible, with the reason, so a machine without the
/// clients fails loudly.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(ensure_venv) {
        Ok(python) => python,
        Err(reason) => panic!(
            "interop test setup failed (run .ci/run, or install python3-venv and let \
             the tests create {}):\n{reason}",
            venv_dir().display()
        ),
    }
}

/// `kcat` (or Debian's older name `kafkacat`), installed on first use if missing.
///
/// # Panics
///
/// If it cannot be found or installed, with the reason.
pub fn kcat() -> &'static str {
    static KCAT: OnceLock<Result<String, String>> = OnceLock::new();
    match KCAT.get_or_init(ensure_kcat) {
        Ok(kcat) => kcat,
        Err(reason) => {
            panic!("interop test setup failed (run .ci/run, or install kcat):\n{reason}")
        }
    }
}

/// The interop virtualenv: `target/interop-venv`.
pub fn venv_dir() -> PathBuf {
    workspace().join("target").join("interop-venv")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn apt_get_install(packages: &[&str]) -> Result<(), String> {
    if !is_root() {
        return Err(format!(
            "{} missing and not running as root; install it with apt-get",
            packages.join(" ")
        ));
    }
    run_ok(
        Command::new("apt-get")
            .args(["update", "-qq"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get update",
    )?;
    run_ok(
        Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get install",
    )?;
    Ok(())
}

/// `name==version` pairs from the requirements file.
fn pins() -> Vec<(&'static str, &'static str)> {
    REQUIREMENTS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once("=="))
        .collect()
}

/// Prints `name==version` for each pinned package, as installed in the venv.
const VERSION_PROBE: &str = "\
import importlib.metadata as m, sys
for name in sys.argv[1:]:
    try:
        print('%s==%s' % (name, m.version(name)))
    except m.PackageNotFoundError:
        print('%s==missing' % name)
import kafka, confluent_kafka
";

fn venv_matches_pins(python: &Path) -> bool {
    let pins = pins();
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(VERSION_PROBE);
    for (name, _) in &pins {
        cmd.arg(name);
    }
    match run(&mut cmd, "venv version probe", SETUP_TIMEOUT) {
        Ok(out) if out.status.success() => pins
            .iter()
            .all(|(name, version)| out.stdout.contains(&format!("{name}=={version}"))),
        _ => false,
    }
}

fn ensure_venv() -> Result<PathBuf, String> {
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    if python.exists() && venv_matches_pins(&python) {
        return Ok(python);
    }
    if !python.exists() {
        std::fs::create_dir_all(workspace().join("target"))
            .map_err(|e| format!("creating target/: {e}"))?;
        let create = || {
            run_ok(
                Command::new("python3").arg("-m").arg("venv").arg(&venv),
                "python3 -m venv",
            )
        };
        if let Err(first) = create() {
            // Debian splits venv/ensurepip into python3-venv.
            apt_get_install(&["python3-venv"])
                .map_err(|e| format!("{first}\nthen installing python3-venv: {e}"))?;
            let _ = std::fs::remove_dir_all(&venv);
            create()?;
        }
    }
    run_ok(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(scripts_dir().join("requirements.txt")),
        "pip install -r tests/interop/requirements.txt",
    )?;
    if !venv_matches_pins(&python) {
        return Err(format!(
            "after pip install, {} still lacks the pinned versions {:?}",
            venv.display(),
            pins()
        ));
    }
    Ok(python)
}

fn find_kcat() -> Option<String> {
    ["kcat", "kafkacat"].into_iter().find_map(|name| {
        let ok = run(
            Command::new(name).arg("-V"),
            "kcat -V",
            Duration::from_secs(30),
        )
        .map(|o| o.status.success())
        .unwrap_or(false);
        ok.then(|| name.to_string())
    })
}

fn ensure_kcat() -> Result<String, String> {
    if let Some(kcat) = find_kcat() {
        return Ok(kcat);
    }
    if apt_get_install(&["kcat"]).is_err() {
        apt_get_install(&["kafkacat"])?;
    }
    find_kcat().ok_or_else(|| "kcat installed but `kcat -V` still fails".to_string())
}
