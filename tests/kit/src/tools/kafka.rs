//! Apache Kafka's jars: the release pinned in `tests/apache-kafka/pom.xml`,
//! copied from Maven Central into `<workspace>/target/apache-kafka/libs` on first
//! use (as `.ci/run` does up front).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::paths::workspace;
use super::process::run;

/// The Maven project that pins the Kafka release.
const POM: &str = include_str!("../../../apache-kafka/pom.xml");

/// Upper bound for `mvn dependency:copy-dependencies` on a cold `~/.m2`.
const MVN_TIMEOUT: Duration = Duration::from_secs(900);

/// `target/apache-kafka`: the jars (`libs/`) and the tests' node directories.
pub fn home() -> PathBuf {
    workspace().join("target").join("apache-kafka")
}

/// The Kafka version pinned in the pom (`<kafka.version>`).
pub fn kafka_version() -> &'static str {
    POM.split_once("<kafka.version>")
        .and_then(|(_, rest)| rest.split_once("</kafka.version>"))
        .map(|(v, _)| v.trim())
        .expect("tests/apache-kafka/pom.xml names <kafka.version>")
}

/// The directory of Kafka's jars, copied from Maven Central on first use; panics
/// with the reason (and mvn's output) if that is impossible.
pub fn libs() -> &'static Path {
    static LIBS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match LIBS.get_or_init(install) {
        Ok(dir) => dir,
        Err(reason) => panic!(
            "installing Apache Kafka {} failed (needs java and mvn; .ci/run installs it \
             into {}):\n{reason}",
            kafka_version(),
            home().join("libs").display()
        ),
    }
}

/// `libs/` is complete when its marker names the pinned version. A new copy is
/// made beside it and renamed into place, so concurrent test binaries never see
/// a partial one.
fn install() -> Result<PathBuf, String> {
    let libs = home().join("libs");
    let marker = libs.join("KAFKA_VERSION");
    if std::fs::read_to_string(&marker).is_ok_and(|v| v.trim() == kafka_version()) {
        return Ok(libs);
    }
    std::fs::create_dir_all(home()).map_err(|e| format!("creating {}: {e}", home().display()))?;
    let staging = home().join(format!("libs.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let pom = workspace()
        .join("tests")
        .join("apache-kafka")
        .join("pom.xml");
    let mut mvn = Command::new("mvn");
    mvn.args(["-q", "-B", "-f"])
        .arg(&pom)
        .arg("dependency:copy-dependencies")
        .arg(format!("-DoutputDirectory={}", staging.display()));
    let out = run(&mut mvn, "mvn dependency:copy-dependencies", MVN_TIMEOUT)?;
    if !out.status.success() {
        return Err(out.describe("mvn dependency:copy-dependencies"));
    }
    std::fs::write(staging.join("KAFKA_VERSION"), kafka_version())
        .map_err(|e| format!("writing the marker: {e}"))?;
    if std::fs::read_to_string(&marker).is_ok_and(|v| v.trim() == kafka_version()) {
        // Another process finished first.
        let _ = std::fs::remove_dir_all(&staging);
        return Ok(libs);
    }
    let _ = std::fs::remove_dir_all(&libs);
    if let Err(e) = std::fs::rename(&staging, &libs) {
        let _ = std::fs::remove_dir_all(&staging);
        if !std::fs::read_to_string(&marker).is_ok_and(|v| v.trim() == kafka_version()) {
            return Err(format!("moving the jars into {}: {e}", libs.display()));
        }
    }
    Ok(libs)
}
