// Preloaded into kinesalite and dynalite: their request handlers rethrow the error a client's
// aborted request raises (ECONNRESET "aborted"), which kills the server whenever a test closes
// a subscriber with a read in flight. That one error is ignored; any other still ends the
// process, so real failures are not hidden.
process.on('uncaughtException', (err) => {
  if (err && err.code === 'ECONNRESET' && err.message === 'aborted') return;
  console.error(err);
  process.exit(1);
});
