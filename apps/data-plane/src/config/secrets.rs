//! The JWT signing secret: from the environment or a generated private file.

use std::path::Path;

use anyhow::Context;

/// Reads the JWT secret from DATA_PLANE_JWT_SECRET, or from the file
/// DATA_PLANE_JWT_SECRET_FILE names (DATA_DIR/jwt_secret by default),
/// generating that file (mode 0600) on first use. Replicas that share the
/// file (a volume of its own) share the secret: the first to start writes
/// it whole, under its final name in one step, and the others read it.
pub fn jwt_secret(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    if let Ok(secret) = std::env::var("DATA_PLANE_JWT_SECRET")
        && !secret.is_empty()
    {
        return Ok(secret.into_bytes());
    }
    let path = match std::env::var_os("DATA_PLANE_JWT_SECRET_FILE") {
        Some(file) if !file.is_empty() => std::path::PathBuf::from(file),
        _ => data_dir.join("jwt_secret"),
    };
    if let Some(secret) = read_secret(&path)? {
        return Ok(secret);
    }
    let dir = path.parent().unwrap_or(data_dir);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let secret: [u8; 32] = rand::random();
    let encoded = hex::encode(secret).into_bytes();
    // Written whole under a name of its own, then linked to the real name,
    // which fails when another process got there first: nobody ever reads
    // half a secret, and every replica ends up with the same one.
    let partial = dir.join(format!(
        ".jwt_secret.{}.{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    write_private(&partial, &encoded)?;
    let linked = std::fs::hard_link(&partial, &path);
    let _ = std::fs::remove_file(&partial);
    match linked {
        Ok(()) => {
            tracing::info!(path = %path.display(), "generated a new JWT secret");
            Ok(encoded)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_secret(&path)?
            .with_context(|| format!("{} vanished while it was read", path.display())),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

/// The secret in `path`; `None` when there is no such file.
fn read_secret(path: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.len() >= 32 => Ok(Some(bytes)),
        Ok(_) => anyhow::bail!(
            "{} is shorter than 32 bytes; delete it to generate a new one",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)?;
    Ok(())
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("creating {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_starting_together_share_one_generated_secret() {
        let dir = tempfile::tempdir().unwrap();
        let secrets: Vec<Vec<u8>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| jwt_secret(dir.path()).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(secrets.iter().all(|s| s == &secrets[0]));
        assert_eq!(secrets[0].len(), 64);
        assert_eq!(
            std::fs::read(dir.path().join("jwt_secret")).unwrap(),
            secrets[0]
        );
        // Nothing but the secret is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
