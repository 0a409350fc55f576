//! The unit files and the .deb: `systemd-analyze verify` on the units with
//! ExecStart pointed at the binary cargo built, and the package built by
//! packaging/build-deb.sh, unpacked into a scratch root with `dpkg -x`.
//! Each skips where its tool is missing, unless
//! RESPITE_REQUIRE_SYSTEMD_TOOLS=1 (CI). The maintainer scripts are only
//! parsed here: packaging/test-deb.sh (`just deb-test`, run by CI as root
//! on a throwaway machine) installs, upgrades, removes and purges the
//! package for real, which no test may do on a developer's machine.

mod common;

use std::path::Path;
use std::process::Command;

use common::have_tool;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn unit_files_pass_systemd_analyze_verify() {
    if !have_tool("systemd-analyze") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let service = std::fs::read_to_string(repo().join("configs/respited.service")).unwrap();
    assert!(service.contains("ExecStart=/usr/bin/respited "));
    let service = service.replace("/usr/bin/respited", env!("CARGO_BIN_EXE_respited"));
    std::fs::write(tmp.path().join("respited.service"), service).unwrap();
    std::fs::copy(
        repo().join("configs/respited.socket"),
        tmp.path().join("respited.socket"),
    )
    .unwrap();
    // The Litestream unit names `litestream` by name (systemd finds it in
    // /usr/local/bin or /usr/bin); verify needs an executable there, so
    // the check points it at one that exists.
    let litestream =
        std::fs::read_to_string(repo().join("configs/respite-litestream.service")).unwrap();
    assert!(
        litestream.contains("ExecStart=litestream replicate -config /etc/respite/litestream.yml")
    );
    assert!(litestream.contains("ExecStartPre=litestream restore "));
    assert!(litestream.contains("WantedBy=respited.service"));
    let litestream = litestream.replace("=litestream ", "=/bin/true ");
    std::fs::write(tmp.path().join("respite-litestream.service"), litestream).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(tmp.path().join("respited.service"))
        .arg(tmp.path().join("respited.socket"))
        .arg(tmp.path().join("respite-litestream.service"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    // verify exits 0 on some warnings; the units must have none.
    assert!(
        !text.contains("respited.") && !text.contains("respite-litestream."),
        "{text}"
    );
}

#[test]
fn the_deb_installs_the_binary_units_config_and_system_entries() {
    if !have_tool("dpkg-deb") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Uncompressed: xz takes most of a minute on the 80 MB debug binary.
    let out = Command::new(repo().join("packaging/build-deb.sh"))
        .env("RESPITE_DEB_COMPRESS", "none")
        .arg(env!("CARGO_BIN_EXE_respited"))
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(deb.ends_with(".deb"), "{deb}");
    let root = tmp.path().join("root");
    let x = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .status()
        .unwrap();
    assert!(x.success());
    for file in [
        "usr/bin/respited",
        "lib/systemd/system/respited.service",
        "lib/systemd/system/respited.socket",
        "etc/respite/respite.toml",
        "lib/systemd/system/respite-litestream.service",
        "etc/respite/litestream.yml",
        "usr/lib/sysusers.d/respite.conf",
        "usr/lib/tmpfiles.d/respite.conf",
        "usr/share/doc/respite/operations.md",
    ] {
        assert!(root.join(file).is_file(), "{file} missing from the package");
    }
    let v = Command::new(root.join("usr/bin/respited"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("respited "));
    let sysusers = std::fs::read_to_string(root.join("usr/lib/sysusers.d/respite.conf")).unwrap();
    assert!(
        sysusers.lines().any(|l| l.starts_with("u respite ")),
        "{sysusers}"
    );
    let tmpfiles = std::fs::read_to_string(root.join("usr/lib/tmpfiles.d/respite.conf")).unwrap();
    assert!(
        tmpfiles.contains("d /var/lib/respite 0750 respite respite"),
        "{tmpfiles}"
    );
    // The control data: the config is a conffile (kept on upgrade), and
    // purge removes the data.
    let control = tmp.path().join("control");
    let e = Command::new("dpkg-deb")
        .arg("-e")
        .arg(&deb)
        .arg(&control)
        .status()
        .unwrap();
    assert!(e.success());
    let conffiles = std::fs::read_to_string(control.join("conffiles")).unwrap();
    assert_eq!(
        conffiles.trim(),
        "/etc/respite/respite.toml\n/etc/respite/litestream.yml"
    );
    let postrm = std::fs::read_to_string(control.join("postrm")).unwrap();
    assert!(postrm.contains("purge") && postrm.contains("rm -rf /var/lib/respite"));
    // Each maintainer script is a shell script /bin/sh accepts.
    for script in ["postinst", "prerm", "postrm"] {
        let check = Command::new("sh")
            .arg("-n")
            .arg(control.join(script))
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    let info = Command::new("dpkg-deb")
        .arg("-f")
        .arg(&deb)
        .arg("Package")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&info.stdout).trim(), "respite");
}
