//! A JSON-RPC session driven through an in-memory connection: arbitrary bytes from the peer
//! into a `Connection` (the type every runner door and plugin link uses), which must answer
//! what it can, report what it cannot, and end without a panic or a hang when the bytes
//! end. Requests it receives are answered with an error, as a server would.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject, Incoming};

fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let (conn, mut incoming) = Connection::spawn(
            read,
            write,
            ConnectionOptions {
                max_body: 4096,
                ..Default::default()
            },
        );
        let (mut peer_read, mut peer_write) = tokio::io::split(theirs);
        let bytes = data.to_vec();
        let writer = tokio::spawn(async move {
            let _ = peer_write.write_all(&bytes).await;
            let _ = peer_write.shutdown().await;
        });
        let drain = tokio::spawn(async move {
            let mut sink = Vec::new();
            let _ = peer_read.read_to_end(&mut sink).await;
        });
        let served = async {
            while let Some(message) = incoming.recv().await {
                if let Incoming::Request(request) = message {
                    let _ = conn
                        .respond(
                            request.id,
                            Err(ErrorObject::method_not_found(&request.method)),
                        )
                        .await;
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), served)
            .await
            .expect("the connection ends when the bytes do");
        drop(conn);
        let _ = writer.await;
        drain.abort();
    });
});
